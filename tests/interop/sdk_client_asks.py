"""The official SDK client as the agent, with elicitation, sampling and roots callbacks,
through `mcpd bridge`; it calls the asking server's tools and lists prompts.

usage: python sdk_client_asks.py MODE -- BRIDGE_COMMAND [ARG...]
Prints one JSON object: the protocol version, each tool's text, what it was asked.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters


async def main() -> None:
    mode = sys.argv[1]
    command = sys.argv[sys.argv.index("--") + 1 :]
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(f"elicitation: {params.message}")
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> Any:
        asked.append("sampling")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="blue"),
            model="test-model",
            stop_reason="endTurn",
        )

    async def roots(context: Any) -> types.ListRootsResult:
        asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/a", name="a")])

    params = StdioServerParameters(command=command[0], args=command[1:])
    seen: dict[str, Any] = {"asked": asked}
    async with Client(
        params,
        mode=mode,  # type: ignore[arg-type]
        elicitation_callback=elicit,
        sampling_callback=sample,
        list_roots_callback=roots,
    ) as client:
        seen["version"] = client.session.protocol_version
        for tool, args in (("greet", {}), ("muse", {"topic": "sky"}), ("where", {})):
            result = await client.call_tool(f"mcp__ask__{tool}", args)
            seen[tool] = result.content[0].text  # type: ignore[union-attr]
    print(json.dumps(seen))


anyio.run(main)
