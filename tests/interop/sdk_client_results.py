"""The official SDK client as an agent that declares no capabilities, through
`mcpd bridge`: it calls tools and prints what it got of each.

usage: python sdk_client_results.py MODE TOOLS_JSON -- BRIDGE_COMMAND [ARG...]
MODE is the client's (auto: 2026-07-28; legacy: the handshake); TOOLS_JSON a list of
tool names. Prints one JSON object: the protocol version, and for each tool whether its
result is an error, its texts and its _meta.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from mcp import Client, StdioServerParameters


async def main() -> None:
    mode, tools = sys.argv[1], json.loads(sys.argv[2])
    command = sys.argv[sys.argv.index("--") + 1 :]
    params = StdioServerParameters(command=command[0], args=command[1:])
    seen: dict[str, Any] = {}
    async with Client(params, mode=mode) as client:  # type: ignore[arg-type]
        seen["version"] = client.session.protocol_version
        for tool in tools:
            result = await client.call_tool(tool, {})
            seen[tool] = {
                "is_error": result.is_error,
                "texts": [c.text for c in result.content if c.type == "text"],
                "meta": result.meta,
            }
    print(json.dumps(seen))


anyio.run(main)
