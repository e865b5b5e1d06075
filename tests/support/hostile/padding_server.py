"""A stdio MCP server that echoes the secret in its environment (``API_KEY``) padded so
that mcpd's own cuts fall inside it, all but its last character before each cut: a
stderr line too long to keep whole, and a stdout line that is not JSON-RPC. Then it
serves one tool, ``crash``, which ends it (mcpd keeps its stderr's last lines for
status once it ended). Plain stdlib, so it starts fast."""

from __future__ import annotations

import json
import os
import sys

KEY = os.environ.get("API_KEY", "")
# What mcpd keeps of a stderr line over its limit, and quotes of a stdout line that is
# not JSON-RPC.
STDERR_KEPT = 512
QUOTED_LINE = 200


def padded(kept: int, after: int) -> bytes:
    return (b"x" * (kept - len(KEY) + 1)) + KEY.encode() + b"z" * after + b"\n"


def write(msg: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def main() -> None:
    sys.stderr.buffer.write(padded(STDERR_KEPT, 5000))
    sys.stderr.buffer.flush()
    sys.stdout.buffer.write(padded(QUOTED_LINE, 60))
    sys.stdout.buffer.flush()
    tool = {"name": "crash", "description": "exits", "inputSchema": {"type": "object"}}
    for line in sys.stdin:
        msg = json.loads(line)
        rid, method = msg.get("id"), msg.get("method")
        if rid is None:
            continue
        if method == "initialize":
            result: dict[str, object] = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "padding", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [tool]}
        elif method == "tools/call":
            sys.exit(1)
        else:
            result = {}
        write({"jsonrpc": "2.0", "id": rid, "result": result})


if __name__ == "__main__":
    main()
