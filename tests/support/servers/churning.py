"""A legacy stdio MCP server whose large tool list changes every time it is listed,
and which announces a change after every list it sends, for as long as it runs.

    python churning.py TOOLS DESCRIPTION_BYTES

Its tools are ``t0`` .. ``tN-1``, each with a description of about
DESCRIPTION_BYTES that ends in how many lists it sent before. Plain stdlib, so it
starts fast.
"""

from __future__ import annotations

import json
import sys
from typing import Any

count, size = int(sys.argv[1]), int(sys.argv[2])
words = "word " * (size // 5)
lists = 0


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def tools() -> list[dict[str, Any]]:
    return [
        {"name": f"t{i}", "description": f"{words}{lists}", "inputSchema": {"type": "object"}}
        for i in range(count)
    ]


for line in sys.stdin:
    message = json.loads(line)
    method, rid = message.get("method"), message.get("id")
    if rid is None:
        continue
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "churning", "version": "1"},
        }
        send({"jsonrpc": "2.0", "id": rid, "result": result})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools()}})
        lists += 1
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": method}})
