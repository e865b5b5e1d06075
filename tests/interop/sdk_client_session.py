"""The official SDK client through `mcpd bridge`: progress, then a cancelled call.

usage: python sdk_client_session.py MODE -- BRIDGE_COMMAND [ARG...]
Prints one JSON object with what the client saw.
"""

from __future__ import annotations

import json
import sys

import anyio
from mcp import Client, StdioServerParameters


async def main() -> None:
    mode = sys.argv[1]
    command = sys.argv[sys.argv.index("--") + 1 :]
    seen: dict[str, object] = {}
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    params = StdioServerParameters(command=command[0], args=command[1:])
    async with Client(params, mode=mode) as client:
        seen["version"] = client.session.protocol_version
        seen["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
        counted = await client.call_tool(
            "mcp__sdk__count_up", {"steps": 4}, progress_callback=on_progress
        )
        seen["counted"] = counted.content[0].text  # type: ignore[union-attr]
        seen["progress"] = progress
        with anyio.move_on_after(1.0) as scope:
            await client.call_tool("mcp__custom__sleep", {})
        seen["sleep_cancelled"] = scope.cancelled_caught
        done = await client.call_tool("mcp__custom__cancelled", {"count": 1})
        seen["cancelled_upstream"] = json.loads(done.content[0].text)  # type: ignore[union-attr]
    print(json.dumps(seen))


anyio.run(main)
