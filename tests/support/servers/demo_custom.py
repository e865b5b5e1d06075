"""A test server built on the demo runtime: tools that block, fail and change the list.

    python tests/support/servers/demo_custom.py [--http HOST:PORT --ready-file F] [--page-size N]

``sleep`` reports progress 0 (so an HTTP client sees its stream open) and then waits
to be cancelled; ``cancelled`` answers once ``count`` calls to ``sleep`` have been
cancelled, with their request ids, so tests wait on an event rather than a clock.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import trio

from mcpd.demo.main import run_demo
from mcpd.demo.runtime import DemoServer, ToolContext, ToolDef, object_schema


class ShrinkingServer(DemoServer):
    """The demo runtime with a tool that can go, as a server's list may shrink."""

    def remove_tool(self, name: str) -> None:
        if self._tools.pop(name, None) is not None:
            self._tools_changed()


server = ShrinkingServer("custom", "9.9.9")
cancelled_ids: list[Any] = []
_news = [trio.Event()]


@server.tool("Block until cancelled.")
async def sleep(args: dict[str, Any], ctx: ToolContext) -> str:
    try:
        await ctx.progress(0, message="sleeping")
        await trio.sleep_forever()
    finally:
        cancelled_ids.append(ctx.request_id)
        news, _news[0] = _news[0], trio.Event()
        news.set()


@server.tool(
    "Wait until `count` sleep calls were cancelled; return their request ids.",
    object_schema({"count": {"type": "integer", "minimum": 1}}, ["count"]),
)
async def cancelled(args: dict[str, Any], ctx: ToolContext) -> str:
    while len(cancelled_ids) < args["count"]:
        await _news[0].wait()
    return json.dumps(cancelled_ids)


@server.tool("Always fails.")
async def boom(args: dict[str, Any], ctx: ToolContext) -> str:
    raise RuntimeError("kaboom")


async def echo(args: dict[str, Any], ctx: ToolContext) -> str:
    return str(args.get("text", ""))


@server.tool(
    "Add an echo tool with this name.",
    object_schema({"name": {"type": "string", "minLength": 1}}, ["name"]),
)
async def grow(args: dict[str, Any], ctx: ToolContext) -> str:
    server.add_tool(ToolDef(args["name"], "Echo text.", object_schema({}), echo))
    return f"added {args['name']}"


@server.tool(
    "Remove a tool.", object_schema({"name": {"type": "string", "minLength": 1}}, ["name"])
)
async def shrink(args: dict[str, Any], ctx: ToolContext) -> str:
    server.remove_tool(args["name"])
    return f"removed {args['name']}"


@server.tool(
    "Send `count` progress notifications of about `size` bytes each, then answer.",
    object_schema({"count": {"type": "integer"}, "size": {"type": "integer"}}, ["count", "size"]),
)
async def flood(args: dict[str, Any], ctx: ToolContext) -> str:
    for i in range(args["count"]):
        await ctx.progress(i + 1, args["count"], "x" * args["size"])
    return "flooded"


@server.tool("Print to stdout, which must not reach the protocol stream.")
async def chatter(args: dict[str, Any], ctx: ToolContext) -> str:
    print("this line must not reach the client")
    return "printed"


if __name__ == "__main__":
    run_demo(server, sys.argv[1:])
