"""A stdio MCP server (2025-06-18) that holds what it is asked, for tests of how mcpd
stops while a server keeps it waiting.

    python holding.py [--deaf]

It lists one tool, ``hold``, whose calls it never answers; each call it takes is said
on stderr (``holding call N``), which mcpd logs, so a test knows the call reached it.
With ``--deaf`` it answers nothing at all, not even the greeting, and says ``deaf`` on
stderr once it runs. Plain stdlib, so it starts fast.
"""

from __future__ import annotations

import json
import sys
from typing import Any

HOLD = {"name": "hold", "description": "Never answers.", "inputSchema": {"type": "object"}}


def say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def reply(rid: Any, result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    deaf = "--deaf" in sys.argv
    if deaf:
        say("deaf")
    held = 0
    for line in sys.stdin:
        msg = json.loads(line)
        rid, method = msg.get("id"), msg.get("method")
        if deaf or rid is None:
            continue
        if method == "initialize":
            info = {"name": "holding", "version": "1"}
            reply(
                rid,
                {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {}},
                    "serverInfo": info,
                },
            )
        elif method == "tools/list":
            reply(rid, {"tools": [HOLD]})
        elif method == "tools/call":
            held += 1
            say(f"holding call {held}")
        elif method == "ping":
            reply(rid, {})
        else:
            error = {"code": -32601, "message": f"no {method}"}
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}) + "\n")
            sys.stdout.flush()


main()
