"""Drive the official Python SDK client over Streamable HTTP on TCP with a bearer token;
print what it saw as JSON.

usage: python sdk_http_probe.py URL TOKEN MODE TOOL ARGS_JSON
"""

from __future__ import annotations

import json
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    url, token, mode, tool, args_json = sys.argv[1:6]
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        version = client.session.protocol_version
        tools = await client.list_tools()
        result = await client.call_tool(tool, json.loads(args_json), progress_callback=on_progress)
    print(
        json.dumps(
            {
                "protocol_version": version,
                "tools": [t.name for t in tools.tools],
                "is_error": result.is_error,
                "text": [c.text for c in result.content if getattr(c, "type", "") == "text"],
                "progress": progress,
            }
        )
    )


anyio.run(main)
