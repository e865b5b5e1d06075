"""A legacy stdio MCP server that logs what it does, as many servers do: each call's
arguments go out in an ``info`` log message while it serves the call, and each
``logging/setLevel`` it is sent is told back in a ``notice`` log message (``level set
to LEVEL``), so a test sees which level mcpd asked it for. Plain stdlib, so it starts
fast.

Tool: ``note`` (answers ``noted``, after logging its arguments).
"""

from __future__ import annotations

import json
import sys

TOOLS = [{"name": "note", "description": "takes a note", "inputSchema": {"type": "object"}}]


def write(msg: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def log(level: str, data: object) -> None:
    params = {"level": level, "data": data}
    write({"jsonrpc": "2.0", "method": "notifications/message", "params": params})


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        params = msg.get("params") or {}
        if rid is None:
            continue
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "logging", "version": "1"},
            }
            write({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "tools/list":
            write({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            log("info", {"serving": params.get("name"), "arguments": params.get("arguments")})
            result = {"content": [{"type": "text", "text": "noted"}], "isError": False}
            write({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "logging/setLevel":
            write({"jsonrpc": "2.0", "id": rid, "result": {}})
            log("notice", f"level set to {params.get('level')}")
        elif method == "ping":
            write({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            error = {"code": -32601, "message": f"no {method}"}
            write({"jsonrpc": "2.0", "id": rid, "error": error})


if __name__ == "__main__":
    main()
