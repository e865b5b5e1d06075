"""A 2026-07-28 stdio server that answers its calls and mcpd's probes but leaves a
tools/list unanswered when told to, for tests.

Its tools: ``echo`` (answers its argument ``text``), ``hang`` (answered, then it lists
a tool ``later`` too, announces that its tool list changed, and leaves every
tools/list after that unanswered), ``answer`` (answered, then tools/list is answered
again and a change announced once more), ``freeze`` (from then on nothing is answered,
this call nor any request after it, though it keeps reading). Every request it reads
is appended to the log file named by its one argument (``METHOD``, a call's tool name
after it), so a test can tell what reached it. Plain stdlib, so it starts fast.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MODERN = "2026-07-28"
SHAPE = {"type": "object", "properties": {"text": {"type": "string"}}}
FIRST = ("echo", "hang", "answer", "freeze")
state: dict[str, Any] = {"tools": list(FIRST), "hang": False, "frozen": False, "listen": None}


def send(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")
    sys.stdout.flush()


def result(rid: Any, value: dict[str, Any]) -> None:
    send({"id": rid, "result": {"resultType": "complete", **value}})


def text(rid: Any, said: str) -> None:
    result(rid, {"content": [{"type": "text", "text": said}]})


def announce() -> None:
    listen = state["listen"]
    if listen is not None:
        meta = {"io.modelcontextprotocol/subscriptionId": listen}
        send({"method": "notifications/tools/list_changed", "params": {"_meta": meta}})


def call(rid: Any, name: str, arguments: dict[str, Any]) -> None:
    if name == "freeze":
        state["frozen"] = True
        return
    text(rid, f"{name}:{arguments.get('text', '')}")
    if name == "hang":
        state["hang"] = True
        state["tools"] = [*FIRST, "later"]
        announce()
    elif name == "answer":
        state["hang"] = False
        announce()


def handle(msg: dict[str, Any]) -> None:
    rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    if rid is None or state["frozen"]:
        return
    if method == "server/discover":
        caps = {"tools": {"listChanged": True}}
        result(rid, {"supportedVersions": [MODERN], "capabilities": caps})
    elif method == "tools/list":
        if not state["hang"]:
            tools = [{"name": n, "inputSchema": SHAPE} for n in state["tools"]]
            result(rid, {"tools": tools, "ttlMs": 60000, "cacheScope": "private"})
    elif method == "tools/call":
        call(rid, params.get("name", ""), params.get("arguments") or {})
    elif method == "subscriptions/listen":
        state["listen"] = rid
        honoured = {k: True for k, v in (params.get("notifications") or {}).items() if v is True}
        meta = {"io.modelcontextprotocol/subscriptionId": rid}
        params = {"_meta": meta, "notifications": honoured}
        send({"method": "notifications/subscriptions/acknowledged", "params": params})
    else:
        send({"id": rid, "error": {"code": -32601, "message": f"no {method}"}})


def main() -> None:
    with open(sys.argv[1], "a", encoding="utf-8") as log:
        for line in sys.stdin:
            if not line.strip():
                continue
            msg = json.loads(line)
            said = msg.get("method")
            if said == "tools/call":
                said += " " + str((msg.get("params") or {}).get("name"))
            log.write(f"{said}\n")
            log.flush()
            handle(msg)


main()
