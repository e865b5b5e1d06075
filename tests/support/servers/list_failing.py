"""A legacy stdio server whose lists fail when it is asked for them again, for tests.

Its first argument names a file every request it reads is appended to (its method);
its second says how a list fails: ``error`` (a JSON-RPC error) or ``page`` (a page
that is no list), or ``prompts``: its prompts/list answers an error from the start,
whatever else it is asked. Its resources may be subscribed to. Its tools: ``echo``
(answers its argument ``text``), ``slow`` (left unanswered until ``release`` is
called; meanwhile every list fails, and it announces that each changed), ``release``
(answers ``slow``, then itself), ``mend`` (lists are answered again, a tool ``later``
among them, and a change of the tool list announced), ``exit`` (the server exits).
Plain stdlib, so it starts fast.
"""

from __future__ import annotations

import json
import sys
from typing import Any

LOG, HOW = sys.argv[1], sys.argv[2]
SHAPE = {"type": "object", "properties": {"text": {"type": "string"}}}
FIELDS = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources"}
state: dict[str, Any] = {
    "tools": ["echo", "slow", "release", "mend", "exit"],
    "failing": False,
    "slow": None,
}


def send(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")
    sys.stdout.flush()


def text(rid: Any, said: str) -> None:
    send({"id": rid, "result": {"content": [{"type": "text", "text": said}]}})


def announce(*kinds: str) -> None:
    for kind in kinds:
        send({"method": f"notifications/{kind}/list_changed"})


def items(method: str) -> list[dict[str, Any]]:
    if method == "tools/list":
        return [{"name": n, "inputSchema": SHAPE} for n in state["tools"]]
    if method == "prompts/list":
        return [{"name": "greet"}]
    return [{"uri": "file:///notes", "name": "notes"}]


def listed(rid: Any, method: str) -> None:
    field = FIELDS[method]
    if HOW == "prompts" and method == "prompts/list":
        send({"id": rid, "error": {"code": -32603, "message": "no prompts today"}})
    elif not state["failing"]:
        send({"id": rid, "result": {field: items(method)}})
    elif HOW == "error":
        send({"id": rid, "error": {"code": -32603, "message": "temporarily unavailable"}})
    else:
        send({"id": rid, "result": {field: "none"}})


def call(rid: Any, name: str, arguments: dict[str, Any]) -> None:
    if name == "exit":
        sys.exit(0)
    if name == "slow":
        state["slow"] = rid
        state["failing"] = True
        announce("tools", "prompts", "resources")
        return
    if name == "release":
        if state["slow"] is not None:
            text(state["slow"], "slow:done")
            state["slow"] = None
    elif name == "mend":
        state["failing"] = False
        state["tools"] = [*state["tools"], "later"]
    text(rid, f"{name}:{arguments.get('text', '')}")
    if name == "mend":
        announce("tools")


def handle(msg: dict[str, Any]) -> None:
    rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    with open(LOG, "a") as log:
        log.write(f"{method}\n")
    if rid is None:
        return
    if method == "initialize":
        caps = {key: {"listChanged": True} for key in ("tools", "prompts", "resources")}
        caps["resources"]["subscribe"] = True
        info = {"name": "failing", "version": "1"}
        result = {"protocolVersion": "2025-06-18", "capabilities": caps, "serverInfo": info}
        send({"id": rid, "result": result})
    elif method in FIELDS:
        listed(rid, method)
    elif method == "resources/subscribe":
        send({"id": rid, "result": {}})
    elif method == "resources/templates/list":
        send({"id": rid, "result": {"resourceTemplates": []}})
    elif method == "tools/call":
        call(rid, params.get("name", ""), params.get("arguments") or {})
    elif method == "ping":
        send({"id": rid, "result": {}})
    else:
        send({"id": rid, "error": {"code": -32601, "message": f"no {method}"}})


for line in sys.stdin:
    handle(json.loads(line))
