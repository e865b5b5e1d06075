"""Drive the official SDK client over Streamable HTTP on mcpd's Unix socket; print what
it saw as JSON.

usage: python sdk_unix_http_probe.py SOCKET MODE TOOL ARGS_JSON
"""

from __future__ import annotations

import json
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    sock, mode, tool, args_json = sys.argv[1:5]
    http = httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(uds=sock), timeout=30)
    async with http:
        transport = streamable_http_client("http://mcpd/mcp", http_client=http)
        async with Client(transport, mode=mode) as client:
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
