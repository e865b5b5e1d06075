"""Drive the official SDK client against a stdio command; print what it saw as JSON.

usage: python sdk_client_probe.py MODE TOOL ARGS_JSON -- COMMAND [ARG...]
"""

from __future__ import annotations

import json
import sys

import anyio
from mcp import Client, StdioServerParameters


async def main() -> None:
    mode, tool, args_json = sys.argv[1], sys.argv[2], sys.argv[3]
    command = sys.argv[sys.argv.index("--") + 1 :]
    server = StdioServerParameters(command=command[0], args=command[1:])
    async with Client(server, mode=mode) as client:
        version = client.session.protocol_version
        tools = await client.list_tools()
        result = await client.call_tool(tool, json.loads(args_json))
        print(
            json.dumps(
                {
                    "protocol_version": version,
                    "tools": [t.name for t in tools.tools],
                    "is_error": result.is_error,
                    "text": [c.text for c in result.content if getattr(c, "type", "") == "text"],
                }
            )
        )


anyio.run(main)
