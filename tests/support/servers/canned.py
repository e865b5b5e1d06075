"""A 2026-07-28 stdio MCP server whose answers are canned, for tests of what reaches an
agent of what a server sends.

    python canned.py ANSWERS.json

ANSWERS.json holds ``tools``: each tool's name and the result of calling it (an object,
or JSON text as a string, written as it is); ``defs``: for a tool of these, the fields
its definition has besides its name and input schema (an output schema, say);
``tasks``: each task id and the result of ``tasks/get`` for it, which a listen naming
the task also gets at once as its ``notifications/tasks``; ``ttl``: JSON text written
as the ``ttlMs`` of the discover result (``0`` when absent), and ``list_ttl`` as that
of ``tools/list`` (``ttl`` when absent); ``methods``: the result of each other method,
such as ``prompts/get`` (the server offers prompts, resources and completions as it
has results for their methods). With ``tasks`` the server offers the tasks
extension. Plain stdlib, so it starts fast.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MODERN = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
SUB = "io.modelcontextprotocol/subscriptionId"

with open(sys.argv[1]) as f:
    answers = json.load(f)
tools: dict[str, Any] = answers.get("tools", {})
defs: dict[str, Any] = answers.get("defs", {})
tasks: dict[str, Any] = answers.get("tasks", {})
ttl: str = answers.get("ttl", "0")
list_ttl: str = answers.get("list_ttl", ttl)
methods: dict[str, Any] = answers.get("methods", {})
FAMILIES = {"prompts/": "prompts", "resources/": "resources", "completion/": "completions"}


def text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def send(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def result(rid: Any, body: str) -> None:
    send(f'{{"jsonrpc":"2.0","id":{json.dumps(rid)},"result":{body}}}')


def cacheable(fields: dict[str, Any], ttl: str) -> str:
    """A result with the ttlMs ``ttl``, written as it is."""
    body = json.dumps({"resultType": "complete", "cacheScope": "private", **fields})
    return body[:-1] + f',"ttlMs":{ttl}}}'


def handle(msg: dict[str, Any]) -> None:
    rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    if rid is None:
        return
    if method == "server/discover":
        caps: dict[str, Any] = {"tools": {}}
        if tasks:
            caps["extensions"] = {TASKS: {}}
        for prefix, cap in FAMILIES.items():
            if any(m.startswith(prefix) for m in methods):
                caps[cap] = {}
        result(rid, cacheable({"supportedVersions": [MODERN], "capabilities": caps}, ttl))
    elif method == "tools/list":
        listed = [
            {"name": name, "inputSchema": {"type": "object"}, **defs.get(name, {})}
            for name in tools
        ]
        result(rid, cacheable({"tools": listed}, list_ttl))
    elif method == "tools/call" and params.get("name") in tools:
        result(rid, text(tools[params["name"]]))
    elif method in methods:
        result(rid, text(methods[method]))
    elif method == "tasks/get" and params.get("taskId") in tasks:
        result(rid, text(tasks[params["taskId"]]))
    elif method == "subscriptions/listen":
        wanted = [t for t in params.get("notifications", {}).get("taskIds", []) if t in tasks]
        ack = {"_meta": {SUB: rid}, "notifications": {"taskIds": wanted}}
        send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/subscriptions/acknowledged",
                    "params": ack,
                }
            )
        )
        for task_id in wanted:
            news = json.loads(text(tasks[task_id]))
            news["_meta"] = {SUB: rid}
            send(json.dumps({"jsonrpc": "2.0", "method": "notifications/tasks", "params": news}))
    else:
        error = {"code": -32601, "message": f"no {method}"}
        send(json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}))


for line in sys.stdin:
    if line.strip():
        handle(json.loads(line))
