"""The official Python SDK client through `mcpd bridge`, for server logging: it asks for
"warning", turns on server-everything's simulated logging and waits for a message.

usage: python sdk_client_logging.py TOOL -- BRIDGE_COMMAND [ARG...]
Prints one JSON object with what the client saw.
"""

from __future__ import annotations

import json
import sys

import anyio
from mcp import Client, StdioServerParameters, types


async def main() -> None:
    tool = sys.argv[1]
    command = sys.argv[sys.argv.index("--") + 1 :]
    heard: list[dict[str, object]] = []
    arrived = anyio.Event()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        heard.append({"level": params.level, "logger": params.logger, "data": params.data})
        arrived.set()

    params = StdioServerParameters(command=command[0], args=command[1:])
    async with Client(params, mode="legacy", logging_callback=on_log) as client:
        await client.set_logging_level("warning")
        await client.call_tool(tool, {})
        await arrived.wait()
        await client.call_tool(tool, {})  # off again
    print(json.dumps({"heard": heard}))


anyio.run(main)
