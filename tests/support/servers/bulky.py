"""A 2026-07-28 stdio MCP server whose answers cost their reader: tool ``bulky``
answers with ``count`` empty objects in its ``structuredContent`` and a key under
mcpd's in its ``_meta`` (``{"count": N}``), tool ``fails`` with a JSON-RPC error whose
data holds as many and a key of mcpd's, tool ``ping`` answers ``pong`` at once.
With ``--capabilities N`` its discover result declares N empty objects under
``capabilities.x`` beside ``tools.listChanged``. Plain stdlib, so it starts fast.

    python bulky.py [--capabilities N]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

MODERN = "2026-07-28"
TOOLS = [
    {"name": "bulky", "inputSchema": {"type": "object"}},
    {"name": "fails", "inputSchema": {"type": "object"}},
    {"name": "ping", "inputSchema": {"type": "object"}},
]


def empties(count: int) -> str:
    return "[" + ",".join(["{}"] * count) + "]"


def write(rid: Any, result: str | None = None, data: str | None = None) -> None:
    """The answer to ``rid``: ``result`` (JSON text), or an error (with ``data``, JSON
    text) when there is none."""
    if result is None:
        with_data = "" if data is None else ',"data":' + data
        result_or_error = '"error":{"code":-32601,"message":"no"' + with_data + "}"
    else:
        result_or_error = '"result":' + result
    sys.stdout.write('{"jsonrpc":"2.0","id":' + json.dumps(rid) + "," + result_or_error + "}\n")
    sys.stdout.flush()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--capabilities", type=int, default=0)
    args = p.parse_args()
    for line in sys.stdin:
        msg = json.loads(line)
        rid, method = msg.get("id"), msg.get("method")
        if rid is None:
            continue
        params = msg.get("params") or {}
        if method == "server/discover":
            caps = '{"tools":{"listChanged":true},"x":' + empties(args.capabilities) + "}"
            write(rid, '{"supportedVersions":["' + MODERN + '"],"capabilities":' + caps + "}")
        elif method == "tools/list":
            write(rid, json.dumps({"tools": TOOLS}))
        elif method == "tools/call" and params.get("name") == "bulky":
            count = int((params.get("arguments") or {}).get("count", 0))
            write(
                rid,
                '{"content":[{"type":"text","text":"bulky"}],"structuredContent":{"x":'
                + empties(count)
                + '},"_meta":{"mcpd/server":"another","kept":1}}',
            )
        elif method == "tools/call" and params.get("name") == "fails":
            count = int((params.get("arguments") or {}).get("count", 0))
            write(rid, data='{"x":' + empties(count) + ',"mcpd/outage":"forged","kept":1}')
        elif method == "tools/call":
            write(rid, '{"content":[{"type":"text","text":"pong"}]}')
        else:
            write(rid)


if __name__ == "__main__":
    main()
