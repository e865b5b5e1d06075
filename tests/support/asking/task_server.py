"""A 2026-07-28 stdio server with the tasks extension (io.modelcontextprotocol/tasks),
for tests: ``build`` answers with a task handle when the client takes tasks, and
the task needs one confirmation (tasks/get shows it, tasks/update gives it) before
it completes. Task status notifications go to listens that name the task. A path given
as its one argument gets each line it reads, as it reads it.

With ``TASKS_ANY_ID=1`` in its environment it behaves as a server that numbers its tasks
from the start again after a restart may: a listen is taken for every id it names,
issued yet or not, and told each named task's state at once."""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

EXT = "io.modelcontextprotocol/tasks"
SUB = "io.modelcontextprotocol/subscriptionId"
lock = threading.Lock()
tasks: dict[str, dict[str, Any]] = {}
listens: dict[Any, set[str]] = {}
ANY_ID = os.environ.get("TASKS_ANY_ID") == "1"


def send(msg: dict[str, Any]) -> None:
    with lock:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")
        sys.stdout.flush()


def result(rid: Any, value: dict[str, Any]) -> None:
    send({"id": rid, "result": {"resultType": "complete", **value}})


def view(task_id: str) -> dict[str, Any]:
    task = tasks[task_id]
    out = {k: v for k, v in task.items() if k != "answers"}
    if task["status"] == "input_required":
        out["inputRequests"] = {
            "confirm": {
                "method": "elicitation/create",
                "params": {"message": "Go ahead?", "requestedSchema": {"type": "object"}},
            }
        }
    if task["status"] == "completed":
        out["result"] = {
            "content": [
                {"type": "text", "text": f"built, confirmed {task['answers']['confirm']}"},
                {"type": "resource_link", "uri": f"build://{task_id}/log", "name": "log"},
            ]
        }
    return out


def changed(task_id: str) -> None:
    for listen_id, ids in list(listens.items()):
        if task_id in ids:
            send(
                {
                    "method": "notifications/tasks",
                    "params": {**view(task_id), "_meta": {SUB: listen_id}},
                }
            )


def handle(msg: dict[str, Any]) -> None:
    rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    caps = params.get("_meta", {}).get("io.modelcontextprotocol/clientCapabilities", {})
    if method == "server/discover":
        result(
            rid,
            {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}, "extensions": {EXT: {}}},
                "ttlMs": 0,
                "cacheScope": "private",
            },
        )
    elif method == "tools/list":
        tool = {"name": "build", "inputSchema": {"type": "object"}}
        result(rid, {"tools": [tool], "ttlMs": 0, "cacheScope": "private"})
    elif method == "tools/call":
        if EXT not in caps.get("extensions", {}):
            result(rid, {"content": [{"type": "text", "text": "built while you waited"}]})
            return
        # ``pad``: that many more characters in the id, as a server with long ids has.
        pad = (params.get("arguments") or {}).get("pad", 0)
        task_id = f"t-{len(tasks) + 1}" + "x" * pad
        tasks[task_id] = {
            "taskId": task_id,
            "status": "input_required",
            "createdAt": "2026-12-01T10:00:00Z",
            "lastUpdatedAt": "2026-12-01T10:00:00Z",
            "ttlMs": 60000,
            "pollIntervalMs": 100,
            "answers": {},
        }
        send({"id": rid, "result": {**view(task_id), "resultType": "task"}})
    elif method in ("tasks/get", "tasks/update", "tasks/cancel"):
        task_id = params.get("taskId")
        if task_id not in tasks:
            send({"id": rid, "error": {"code": -32602, "message": f"no task {task_id}"}})
            return
        task = tasks[task_id]
        if method == "tasks/get":
            result(rid, view(task_id))
            return
        if method == "tasks/update":
            answer = (params.get("inputResponses") or {}).get("confirm")
            if answer is not None and task["status"] == "input_required":
                task["answers"]["confirm"] = answer.get("action")
                task["status"] = "completed"
        else:
            task["status"] = "cancelled"
        result(rid, {})
        changed(task_id)
    elif method == "subscriptions/listen":
        wanted = params.get("notifications", {}).get("taskIds", [])
        listens[rid] = {t for t in wanted if ANY_ID or t in tasks}
        send(
            {
                "method": "notifications/subscriptions/acknowledged",
                "params": {"_meta": {SUB: rid}, "notifications": {"taskIds": sorted(listens[rid])}},
            }
        )
        if ANY_ID:
            for task_id in sorted(listens[rid] & tasks.keys()):
                send(
                    {
                        "method": "notifications/tasks",
                        "params": {**view(task_id), "_meta": {SUB: rid}},
                    }
                )
    elif method == "notifications/cancelled":
        listens.pop(params.get("requestId"), None)
    elif rid is not None:
        send({"id": rid, "error": {"code": -32601, "message": f"no {method}"}})


log = sys.argv[1] if len(sys.argv) > 1 else None
for line in sys.stdin:
    if log is not None:
        with open(log, "a") as f:
            f.write(line)
    if line.strip():
        handle(json.loads(line))
