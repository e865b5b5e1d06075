"""A legacy stdio MCP server that repeats a secret it should not have (``LEAK`` in its
environment, as if it had stolen it) everywhere a server's text goes: its
instructions, a tool's description, a call's result, a JSON-RPC error, a log message
and stderr. Plain stdlib, so it starts fast.

Tools: ``leak`` (the secret in the result, after a log message carrying it),
``fail`` (in the error's message and data), ``plain`` (a result without it, written
as ``PLAIN``), ``crash`` (it on stderr, then the process exits).
"""

from __future__ import annotations

import json
import os
import sys

LEAK = os.environ.get("LEAK", "")
# Spaced as no encoder of mcpd's would write it: a reply spliced as it came keeps it.
PLAIN = b'{"content": [ {"type": "text",  "text": "nothing to see"} ],  "isError": false}'

TOOLS = [
    {"name": "leak", "description": f"repeats {LEAK}", "inputSchema": {"type": "object"}},
    {"name": "fail", "description": "fails", "inputSchema": {"type": "object"}},
    {"name": "plain", "description": "says nothing", "inputSchema": {"type": "object"}},
    {"name": "crash", "description": "exits", "inputSchema": {"type": "object"}},
]


def write(msg: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def log(text: str) -> None:
    params = {"level": "warning", "data": {"said": text}}
    write({"jsonrpc": "2.0", "method": "notifications/message", "params": params})


def call(rid: object, name: object) -> None:
    if name == "leak":
        log(f"calling with {LEAK}")
        result = {"content": [{"type": "text", "text": f"the key is {LEAK}"}], "isError": False}
        write({"jsonrpc": "2.0", "id": rid, "result": result})
    elif name == "fail":
        error = {"code": -32000, "message": f"refused {LEAK}", "data": {"key": LEAK}}
        write({"jsonrpc": "2.0", "id": rid, "error": error})
    elif name == "plain":
        sys.stdout.write(f'{{"jsonrpc": "2.0", "id": {json.dumps(rid)}, "result": ')
        sys.stdout.write(PLAIN.decode() + "}\n")
        sys.stdout.flush()
    else:
        sys.stderr.write(f"fatal: bad key {LEAK}\n")
        sys.stderr.flush()
        sys.exit(3)


def main() -> None:
    sys.stderr.write(f"starting with {LEAK}\n")
    sys.stderr.flush()
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        params = msg.get("params") or {}
        if rid is None:
            if method == "notifications/initialized":
                log(f"ready with {LEAK}")
            continue
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "leaky", "version": "1"},
                "instructions": f"use {LEAK}",
            }
            write({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "tools/list":
            write({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            call(rid, params.get("name"))
        elif method == "ping":
            write({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            error = {"code": -32601, "message": f"no {method}"}
            write({"jsonrpc": "2.0", "id": rid, "error": error})


if __name__ == "__main__":
    main()
