"""The demo runtime in process: a custom server over in-memory streams, and its pieces."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from mcpd.demo.arguments import check_demo_arguments
from mcpd.demo.runtime import DemoServer, ToolContext, ToolDef, object_schema
from mcpd.demo.stdio import serve_stdio
from protocol.mcp import core as mcp
from tests.support.clients.demo import call, initialize, meta, request


class Client:
    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buf = b""

    async def send(self, msg: dict[str, Any]) -> None:
        await self.stream.send_all(json.dumps(msg).encode() + b"\n")

    async def recv(self) -> dict[str, Any]:
        while b"\n" not in self.buf:
            self.buf += await self.stream.receive_some()
        line, self.buf = self.buf.split(b"\n", 1)
        return dict(json.loads(line))

    async def ask(self, msg: dict[str, Any]) -> dict[str, Any]:
        await self.send(msg)
        while (reply := await self.recv()).get("id") != msg["id"] or "method" in reply:
            pass
        return reply


@asynccontextmanager
async def serving(server: DemoServer) -> AsyncIterator[Client]:
    client_end, server_end = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_stdio, server, server_end, server_end)
        yield Client(client_end)
        await client_end.send_stream.aclose()


def growing_server() -> DemoServer:
    """The pattern for a test server whose tool list changes while it runs."""
    server = DemoServer("growing", page_size=1)

    async def echo(args: dict[str, Any], ctx: ToolContext) -> str:
        return str(args["text"])

    @server.tool("Add an echo tool.", object_schema({"name": {"type": "string"}}, ["name"]))
    async def grow(args: dict[str, Any], ctx: ToolContext) -> str:
        schema = object_schema({"text": {"type": "string"}}, ["text"])
        server.add_tool(ToolDef(args["name"], "Echo.", schema, echo))
        return "ok"

    @server.tool("A structured answer.")
    async def structured(args: dict[str, Any], ctx: ToolContext) -> mcp.CallToolResult:
        return mcp.CallToolResult(content=[mcp.TextContent("42")], structuredContent={"n": 42})

    return server


async def test_a_custom_server_in_process() -> None:
    with trio.fail_after(10):
        async with serving(growing_server()) as client:
            first = (await client.ask(request(1, "tools/list", {"_meta": meta()})))["result"]
            assert [t["name"] for t in first["tools"]] == ["grow"]
            second = await client.ask(
                request(2, "tools/list", {"_meta": meta(), "cursor": first["nextCursor"]})
            )
            assert [t["name"] for t in second["result"]["tools"]] == ["structured"]
            assert "nextCursor" not in second["result"]

            structured = (await client.ask(call(3, "structured", {})))["result"]
            assert structured["structuredContent"] == {"n": 42}

            await client.ask(call(4, "grow", {"name": "echo"}))
            stale = await client.ask(
                request(5, "tools/list", {"_meta": meta(), "cursor": first["nextCursor"]})
            )
            assert stale["error"]["code"] == -32602
            assert (await client.ask(call(6, "echo", {"text": "hi"})))["result"]["content"] == [
                {"type": "text", "text": "hi"}
            ]


async def test_legacy_connection_hears_of_changes_without_asking() -> None:
    server = growing_server()
    with trio.fail_after(10):
        async with serving(server) as client:
            await client.ask(initialize(1))
            server.add_tool(ToolDef("late", "Late.", object_schema({}), _never))
            assert await client.recv() == {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
            }
            server.add_tool(ToolDef("later", "Later.", object_schema({}), _never))
            assert (await client.recv())["method"] == "notifications/tools/list_changed"


async def _never(args: dict[str, Any], ctx: ToolContext) -> str:
    raise AssertionError("not called")


SCHEMA = object_schema(
    {
        "name": {"type": "string", "minLength": 1},
        "count": {"type": "integer", "minimum": 1, "maximum": 5},
        "ratio": {"type": "number"},
        "mode": {"type": "string", "enum": ["a", "b"]},
        "flag": {"type": "boolean"},
    },
    ["name"],
)


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"name": "x"}, None),
        ({"name": "x", "count": 2.0, "ratio": 1, "mode": "a", "flag": False}, None),
        ([], "must be an object"),
        ({}, "missing required argument 'name'"),
        ({"name": ""}, "at least 1 characters"),
        ({"name": "x", "other": 1}, "unexpected argument 'other'"),
        ({"name": "x", "count": True}, "must be of type integer"),
        ({"name": "x", "count": 2.5}, "must be of type integer"),
        ({"name": "x", "count": 9}, "at most 5"),
        ({"name": "x", "ratio": "1"}, "must be of type number"),
        ({"name": "x", "mode": "c"}, "must be one of"),
    ],
)
def test_argument_checks(args: Any, problem: str | None) -> None:
    found = check_demo_arguments(SCHEMA, args)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found
