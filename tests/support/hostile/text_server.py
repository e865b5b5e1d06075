"""A legacy stdio MCP server whose every text carries terminal escapes and hidden
characters (``HOSTILE``): tool descriptions, results, errors, progress, prompts,
resources, a log message once initialized, and stderr. Plain stdlib, so it starts fast.

    python text_server.py          # serves
    python text_server.py --fail   # says HOSTILE on stderr, refuses to start
"""

from __future__ import annotations

import json
import sys

# Erase the line and return to its start; a hyperlink hiding its target; a
# right-to-left override; a zero-width space; tag characters spelling "AB".
HOSTILE = (
    "shown\x1b[2K\rcovered \x1b]8;;https://evil.example\x07link\x1b]8;;\x07 "
    "\u202eesrever\u2069 zero\u200bwidth \U000e0041\U000e0042 end"
)
# Where a server's text is an identifier, kept as the server wrote it: a one-byte CSI
# (a C1 control) and a right-to-left override.
ODD = "odd\x9b2K\u202e"


def write(msg: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def answer(rid: object, result: object) -> None:
    write({"jsonrpc": "2.0", "id": rid, "result": result})


def refuse(rid: object, code: int, message: str) -> None:
    write({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})


TOOLS = [
    {"name": "peek", "description": HOSTILE, "inputSchema": {"type": "object"}},
    {"name": "oops", "description": "fails", "inputSchema": {"type": "object"}},
    {"name": ODD, "description": "its name is odd", "inputSchema": {"type": "object"}},
]


def call(rid: object, params: dict[str, object]) -> None:
    if params.get("name") == "oops":
        refuse(rid, -32603, HOSTILE)
        return
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if token is not None:
        progress = {"progressToken": token, "progress": 1, "total": 2, "message": HOSTILE}
        write({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
    answer(rid, {"content": [{"type": "text", "text": f"first line\n{HOSTILE}\nlast line"}]})


def handle(msg: dict[str, object], failing: bool) -> None:
    method, rid = msg.get("method"), msg.get("id")
    params = msg.get("params")
    params = params if isinstance(params, dict) else {}
    if rid is None:
        if method == "notifications/initialized":
            log = {"level": "warning", "data": HOSTILE}
            write({"jsonrpc": "2.0", "method": "notifications/message", "params": log})
        return
    if failing or method == "server/discover":
        refuse(rid, -32601 if not failing else -32603, HOSTILE)
        return
    if method == "initialize":
        capabilities = {"tools": {}, "prompts": {}, "resources": {}}
        info = {"name": "hostile", "version": "1"}
        answer(rid, {"protocolVersion": "2025-11-25", "capabilities": capabilities,
                     "serverInfo": info})  # fmt: skip
    elif method == "tools/list":
        answer(rid, {"tools": TOOLS})
    elif method == "tools/call":
        call(rid, params)
    elif method == "prompts/list":
        prompt = {"name": "greet", "description": HOSTILE, "arguments": [{"name": "who"}]}
        answer(rid, {"prompts": [prompt, {"name": ODD}]})
    elif method == "prompts/get":
        text = {"type": "text", "text": HOSTILE}
        link = {"type": "resource_link", "uri": "file:///hostile", "name": HOSTILE}
        messages = [{"role": "user", "content": c} for c in (text, link)]
        answer(rid, {"description": f"not what was listed: {HOSTILE}", "messages": messages})
    elif method == "resources/list":
        odd = {"uri": f"file:///{ODD}", "name": "odd"}
        answer(rid, {"resources": [{"uri": "file:///hostile", "name": HOSTILE}, odd]})
    elif method == "resources/templates/list":
        template = {"uriTemplate": "file:///t/{x}", "name": HOSTILE}
        answer(rid, {"resourceTemplates": [template]})
    elif method == "resources/read":
        content = {"uri": "file:///hostile", "mimeType": f"text/plain{HOSTILE}", "text": HOSTILE}
        answer(rid, {"contents": [content]})
    elif method == "ping":
        answer(rid, {})
    else:
        refuse(rid, -32601, f"no method {method}")


def main() -> None:
    failing = "--fail" in sys.argv
    print(HOSTILE, file=sys.stderr, flush=True)
    for line in sys.stdin:
        handle(json.loads(line), failing)
        if failing and "initialize" in line:
            sys.exit(3)


if __name__ == "__main__":
    main()
