"""A 2025-11-25 stdio server with tasks, for tests: ``research`` runs only as a task
(``execution.taskSupport: "required"``) and a plain call of it is refused; ``quick``
may run either way; ``plain`` has no tasks. A task's arguments say how it goes:
``steps`` progress reports then the result, ``hang`` until it is cancelled, or
``fail`` with a JSON-RPC error, ``id`` and ``long_id`` name it oddly in its handle
(see ``create``), and ``typed`` ends with a result that carries a
``resultType`` (which 2025-11-25 does not have, but a server may send). Every message
received is logged, one JSON line each, to the file named by the first argument."""

from __future__ import annotations

import json
import sys
from typing import Any

LOG = open(sys.argv[1], "a", buffering=1)  # noqa: SIM115 - for the process's life
RELATED = "io.modelcontextprotocol/related-task"
tasks: dict[str, dict[str, Any]] = {}
waiting: dict[Any, str] = {}  # tasks/result request id -> task id


def send(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")
    sys.stdout.flush()


def outcome(task_id: str) -> dict[str, Any]:
    task = tasks[task_id]
    if task["status"] == "failed":
        return {"error": {"code": -32000, "message": "the research failed"}}
    result = {
        "content": [
            {"type": "text", "text": f"researched {task['topic']}"},
            {"type": "resource_link", "uri": "file:///report.md", "name": "report"},
        ],
        "_meta": {RELATED: {"taskId": task_id}},
    }
    if task["typed"]:
        result["resultType"] = "complete"
    return {"result": result}


def view(task_id: str) -> dict[str, Any]:
    task = tasks[task_id]
    return {
        "taskId": task_id,
        "status": task["status"],
        "createdAt": "2025-12-01T10:00:00Z",
        "lastUpdatedAt": "2025-12-01T10:00:00Z",
        "ttl": task["ttl"],
        "pollInterval": 100,
    }


def tool(name: str, support: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "inputSchema": {"type": "object"}}
    if support is not None:
        out["execution"] = {"taskSupport": support}
    return out


def create(rid: Any, params: dict[str, Any]) -> None:
    args = params.get("arguments") or {}
    task_id = f"task-{len(tasks) + 1}"
    tasks[task_id] = {
        "status": "working",
        "ttl": params["task"].get("ttl"),
        "topic": args.get("topic", "?"),
        "typed": bool(args.get("typed")),
    }
    handle = view(task_id)
    # ``id``: the handle names the task so instead (a number, null, or by its absence);
    # ``long_id``: that many more characters in the task's id.
    if "id" in args:
        if args["id"] == "absent":
            del handle["taskId"]
        else:
            handle["taskId"] = args["id"]
    elif args.get("long_id"):
        long_id = task_id + "x" * args["long_id"]
        tasks[long_id] = tasks.pop(task_id)
        task_id = handle["taskId"] = long_id
    send({"id": rid, "result": {"task": handle}})
    token = (params.get("_meta") or {}).get("progressToken")
    for step in range(1, int(args.get("steps", 0)) + 1):
        if token is not None:
            send(
                {
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": step, "total": args["steps"]},
                }
            )
    if not args.get("hang"):
        tasks[task_id]["status"] = "failed" if args.get("fail") else "completed"


def handle(msg: dict[str, Any]) -> None:
    LOG.write(json.dumps(msg) + "\n")
    rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        caps = {"tools": {}, "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}}
        send(
            {
                "id": rid,
                "result": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": caps,
                    "serverInfo": {"name": "legacy-tasks", "version": "0"},
                },
            }
        )
    elif method == "tools/list":
        tools = [tool("research", "required"), tool("quick", "optional"), tool("plain", None)]
        send({"id": rid, "result": {"tools": tools}})
    elif method == "tools/call":
        name = params.get("name")
        if "task" in params:
            create(rid, params)
        elif name == "research":
            message = "Tool research requires task augmentation (taskSupport: 'required')"
            send({"id": rid, "error": {"code": -32601, "message": message}})
        else:
            send({"id": rid, "result": {"content": [{"type": "text", "text": f"{name} done"}]}})
    elif method == "tasks/result":
        task_id = params.get("taskId")
        if task_id not in tasks:
            send({"id": rid, "error": {"code": -32602, "message": f"no task {task_id}"}})
        elif tasks[task_id]["status"] == "working":
            waiting[rid] = task_id  # answered when the task ends
        else:
            send({"id": rid, **outcome(task_id)})
    elif method == "tasks/cancel":
        task_id = params.get("taskId")
        if task_id not in tasks or tasks[task_id]["status"] != "working":
            send({"id": rid, "error": {"code": -32602, "message": f"task {task_id} is over"}})
            return
        tasks[task_id]["status"] = "cancelled"
        send({"id": rid, "result": view(task_id)})
    elif method == "notifications/cancelled":
        waiting.pop(params.get("requestId"), None)
    elif method == "ping":
        send({"id": rid, "result": {}})
    elif rid is not None:
        send({"id": rid, "error": {"code": -32601, "message": f"no {method}"}})


for line in sys.stdin:
    if line.strip():
        handle(json.loads(line))
