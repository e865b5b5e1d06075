"""A legacy stdio MCP server that repeats a secret it should not have (``LEAK`` in its
environment) spelled with escapes: every character a ``\\uXXXX`` escape, or with
``SPELLING=html`` in its environment only ``<``, ``>``, ``&``, ``=`` and ``'``, as
HTML-safe encoders (Go's, Gson's) write them. Plain stdlib, so it starts fast.

Tools: ``plain`` (the secret as a text: a result mcpd passes on as it came), ``link``
(the secret in a resource link's name, a text and ``structuredContent``: mcpd rewrites
the link's URI), ``long`` (the secret at the start of a text longer than a small
budget: mcpd cuts it), ``task`` (a task handle whose status message is the secret),
``progress`` (a progress report whose message is the secret, then a result),
``log`` (a log message whose logger is the secret, then a result), ``odd`` (a
result whose ``resultType`` is the secret), ``meta`` (the secret in
``structuredContent`` and ``_meta`` of a short result) and ``fails`` (a JSON-RPC error
with the secret in its data). Its prompt's messages hold it with a
resource link, its resource's contents and its completions hold it, and a read of
any other URI fails with it in the error's data.

With ``MODERN`` in its environment it answers ``server/discover`` too, so that mcpd
speaks 2026-07-28 to it: only then is a ``resultType`` of its acted on (a task handle,
an unknown kind), as a legacy server's is left out.
"""

from __future__ import annotations

import json
import os
import sys

LEAK_ENV = "LEAK"
LEAK = os.environ.get(LEAK_ENV, "")
MODERN = "MODERN" in os.environ
SPELLING_ENV = "SPELLING"
HTML_SAFE = "<>&='"
RESOURCE = "esc://doc"
LONG = 400  # characters of text after the secret in ``long``'s result

LINKED = "file:///doc"  # listed by no server: mcpd hands the agent a URI of its own
TOOLS = [
    {"name": name, "description": f"says {LEAK}", "inputSchema": {"type": "object"}}
    for name in ("plain", "link", "long", "task", "progress", "log", "odd", "ask", "meta", "fails")
]
PROMPT = {"name": "greet", "description": f"greets {LEAK}", "arguments": [{"name": "who"}]}
TEMPLATE = {"uriTemplate": "esc://{name}", "name": "docs", "description": f"holds {LEAK}"}
# The call that waits for the agent's answer to the elicitation request.
waiting: list[object] = []


def spelled(text: str, only: str | None = None) -> str:
    """``text`` as it stands inside a JSON string, each character (or each of ``only``)
    a ``\\u`` escape."""
    return "".join(
        f"\\u{ord(c):04x}" if only is None or c in only else json.dumps(c)[1:-1] for c in text
    )


def write(msg: dict[str, object]) -> None:
    line = json.dumps({"jsonrpc": "2.0", **msg})
    if LEAK:
        html = os.environ.get(SPELLING_ENV) == "html"
        line = line.replace(json.dumps(LEAK)[1:-1], spelled(LEAK, HTML_SAFE if html else None))
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def answer(rid: object, result: dict[str, object]) -> None:
    write({"id": rid, "result": result})


def text(value: str) -> dict[str, object]:
    return {"type": "text", "text": value}


def call(rid: object, name: object, meta: dict[str, object]) -> None:
    if name == "plain":
        answer(rid, {"content": [text(LEAK)]})
    elif name == "link":
        link = {"type": "resource_link", "uri": LINKED, "name": LEAK}
        answer(rid, {"content": [link, text(LEAK)], "structuredContent": {"v": LEAK}})
    elif name == "long":
        answer(rid, {"content": [text(f"{LEAK} {'x' * LONG}")]})
    elif name == "task":
        handle = {"taskId": "t-1", "status": "working", "statusMessage": LEAK}
        answer(rid, {"resultType": "task", **handle})
    elif name == "progress":
        token = meta.get("progressToken")
        report = {"progressToken": token, "progress": 1, "total": 2, "message": LEAK}
        write({"method": "notifications/progress", "params": report})
        answer(rid, {"content": [text("reported")]})
    elif name == "log":
        said = {"level": "error", "logger": LEAK, "data": "said"}
        write({"method": "notifications/message", "params": said})
        answer(rid, {"content": [text("logged")]})
    elif name == "ask":
        waiting.append(rid)
        ask = {"message": LEAK, "requestedSchema": {"type": "object"}}
        write({"id": "ask-1", "method": "elicitation/create", "params": ask})
    elif name == "meta":
        result: dict[str, object] = {
            "content": [text("ok")],
            "structuredContent": {"v": LEAK},
            "_meta": {"k": LEAK},
        }
        answer(rid, result)
    elif name == "fails":
        write({"id": rid, "error": {"code": -32000, "message": "failed", "data": {"k": LEAK}}})
    else:
        answer(rid, {"resultType": LEAK, "content": []})


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        params = msg.get("params") or {}
        if method is None and waiting:  # the agent's answer to the elicitation request
            answer(waiting.pop(), {"content": [text("answered")]})
            continue
        if rid is None:
            continue
        caps = {"tools": {}, "logging": {}, "prompts": {}, "resources": {}, "completions": {}}
        if method == "server/discover" and MODERN:
            found = {"supportedVersions": ["2026-07-28"], "capabilities": caps, "ttlMs": 0}
            answer(rid, {**found, "cacheScope": "private", "instructions": f"use {LEAK}"})
        elif method == "initialize":
            info = {"name": "escaping", "version": "1", "title": f"by {LEAK}"}
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": caps,
                "serverInfo": info,
                "instructions": f"use {LEAK}",
            }
            answer(rid, result)
        elif method == "tools/list":
            answer(rid, {"tools": TOOLS})
        elif method == "tools/call":
            call(rid, params.get("name"), params.get("_meta") or {})
        elif method == "prompts/list":
            answer(rid, {"prompts": [PROMPT]})
        elif method == "prompts/get":
            link = {"type": "resource_link", "uri": LINKED, "name": LEAK}
            messages = [{"role": "user", "content": text(LEAK)}, {"role": "user", "content": link}]
            answer(rid, {"messages": messages})
        elif method == "resources/list":
            answer(rid, {"resources": [{"uri": RESOURCE, "name": "doc", "description": LEAK}]})
        elif method == "resources/templates/list":
            answer(rid, {"resourceTemplates": [TEMPLATE]})
        elif method == "resources/read":
            uri = params.get("uri")
            if uri == RESOURCE:
                answer(rid, {"contents": [{"uri": uri, "text": LEAK}]})
            else:
                error = {"code": -32002, "message": "not found", "data": {"uri": uri, "k": LEAK}}
                write({"id": rid, "error": error})
        elif method == "completion/complete":
            answer(rid, {"completion": {"values": [LEAK], "hasMore": False}})
        elif method == "ping":
            answer(rid, {})
        else:
            write({"id": rid, "error": {"code": -32601, "message": f"no {method}"}})


if __name__ == "__main__":
    main()
