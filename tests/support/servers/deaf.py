"""A 2026-07-28 stdio MCP server that stops reading its stdin after it lists its tools,
until something is written to the FIFO its argument names; then it reads on. Its tool
``report`` answers with what it read from then on (each line's method and id, or that
the line was not JSON), and ``pad`` with "ok". With ``--changed`` it says its tool
list changed just before it stops reading, so that mcpd asks for the list again and
waits for it. Plain stdlib, so it starts fast.

    python deaf.py FIFO [--changed]
"""

from __future__ import annotations

import json
import sys
from typing import Any

MODERN = "2026-07-28"
HOUR_MS = 3_600_000
TOOLS = [{"name": name, "inputSchema": {"type": "object"}} for name in ("pad", "report")]


def send(rid: Any, result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
    sys.stdout.flush()


def text(rid: Any, said: str) -> None:
    send(rid, {"content": [{"type": "text", "text": said}], "resultType": "complete"})


def main() -> None:
    deaf = True
    read: list[Any] = []
    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            read.append(["not JSON", len(line)])
            continue
        method, rid = msg.get("method"), msg.get("id")
        if not deaf:
            read.append([method, rid if rid is not None else msg["params"].get("requestId")])
        if method == "server/discover":
            caps = {"tools": {}}
            found = {"supportedVersions": [MODERN], "capabilities": caps}
            send(rid, {**found, "resultType": "complete", "ttlMs": HOUR_MS})
        elif method == "tools/list":
            send(rid, {"tools": TOOLS, "resultType": "complete", "ttlMs": HOUR_MS})
            if deaf and "--changed" in sys.argv:
                changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
                sys.stdout.write(json.dumps(changed) + "\n")
                sys.stdout.flush()
            if deaf:
                with open(sys.argv[1], "rb") as fifo:
                    fifo.read()
                deaf = False
        elif method == "tools/call":
            if msg["params"]["name"] == "report":
                text(rid, json.dumps(read[:-1]))
            else:
                text(rid, "ok")


main()
