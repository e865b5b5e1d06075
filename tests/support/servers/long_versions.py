"""A stdio server whose ``server/discover`` result lists 2026-07-28 first among so many
versions that the list is longer than mcpd reads, for tests. It answers the legacy
``initialize`` too, and lists one tool, ``echo``. Plain stdlib, so it starts fast.

    python long_versions.py COUNT    (how many versions follow 2026-07-28)
"""

from __future__ import annotations

import json
import sys
from typing import Any

VERSIONS = ["2026-07-28"] + ["1999-01-01"] * int(sys.argv[1])
TOOLS = [{"name": "echo", "inputSchema": {"type": "object"}}]


def send(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    msg = json.loads(line)
    rid, method = msg.get("id"), msg.get("method")
    if rid is None:
        continue
    if method == "server/discover":
        caps = {"tools": {}}
        send({"id": rid, "result": {"supportedVersions": VERSIONS, "capabilities": caps}})
    elif method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}}
        send({"id": rid, "result": {**result, "serverInfo": {"name": "lv", "version": "1"}}})
    elif method == "tools/list":
        send({"id": rid, "result": {"tools": TOOLS}})
    else:
        send({"id": rid, "error": {"code": -32601, "message": f"no {method}"}})
