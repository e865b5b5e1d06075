"""An official Python SDK client as the agent, through `mcpd bridge`, making calls that
mcpd's policy may ask its user about. Its elicitation handler (when it has one)
approves a question whose text has "please" in it and denies any other.

Runs under either SDK line: mcp 2.x (.venv; MODE auto speaks 2026-07-28, legacy the
handshake) or mcp 1.x (.venv-peers-v1; the handshake, MODE ignored).

usage: python sdk_client_policy.py MODE ASKS CALLS_JSON -- BRIDGE_COMMAND [ARG...]
ASKS is "elicitation" or "none"; CALLS_JSON a list of [tool, arguments]. Prints one JSON
object: the protocol version, what the user was asked, and each call's result.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from typing import Any

import anyio

asked: list[str] = []


def decide(message: str) -> dict[str, Any]:
    asked.append(message)
    if "please" in message:
        return {"decision": "approve"}
    return {"decision": "deny", "reason": "not without a please"}


def shown(result: Any) -> dict[str, Any]:
    texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    failed = getattr(result, "is_error", None)
    if failed is None:
        failed = getattr(result, "isError", False)
    return {"is_error": bool(failed), "text": texts}


async def with_v2(mode: str, asks: bool, calls: list[Any], command: list[str]) -> None:
    import mcp_types as types
    from mcp import Client, StdioServerParameters

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content=decide(params.message))

    server = StdioServerParameters(command=command[0], args=command[1:])
    callback = elicit if asks else None
    async with Client(server, mode=mode, elicitation_callback=callback) as client:  # type: ignore[arg-type]
        results = [shown(await client.call_tool(name, args)) for name, args in calls]
        out = {"version": client.session.protocol_version, "asked": asked, "results": results}
    print(json.dumps(out))


async def with_v1(asks: bool, calls: list[Any], command: list[str]) -> None:
    from mcp import ClientSession, StdioServerParameters, types
    from mcp.client.stdio import stdio_client

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content=decide(params.message))

    server = StdioServerParameters(command=command[0], args=command[1:])
    async with (
        stdio_client(server) as (read, write),
        ClientSession(read, write, elicitation_callback=elicit if asks else None) as session,
    ):
        hello = await session.initialize()
        results = [shown(await session.call_tool(name, args)) for name, args in calls]
    print(json.dumps({"version": hello.protocolVersion, "asked": asked, "results": results}))


def main() -> None:
    mode, asks, calls_json = sys.argv[1:4]
    command = sys.argv[sys.argv.index("--") + 1 :]
    calls = json.loads(calls_json)
    if int(version("mcp").split(".")[0]) >= 2:
        anyio.run(with_v2, mode, asks == "elicitation", calls, command)
    else:
        anyio.run(with_v1, asks == "elicitation", calls, command)


main()
