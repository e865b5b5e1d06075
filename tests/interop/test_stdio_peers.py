"""mcpd's upstream client against real stdio servers nobody here wrote, both eras."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from msgspec import Raw

from mcpd.servers.connected.handshake import client_meta
from mcpd.servers.connected.upstream import Upstream
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from tests.support.hosts.peers import (
    SERVERS,
    console_script,
    node_env,
    node_tool,
    sdk_server_cmd,
    v1_python,
)
from tests.support.parts.calls import at_upstream
from transports.stdio.params import StdioParams
from transports.stdio.transport import open_stdio_transport


def decoded(raw: Raw) -> Any:
    return json.loads(bytes(raw))


def text_of(raw: Raw) -> str:
    return "".join(c.get("text", "") for c in decoded(raw)["content"])


async def call(up: Upstream, name: str, arguments: dict[str, Any]) -> Raw:
    params = mcp.CallToolParams(name=name, arguments=Raw(json.dumps(arguments).encode()))
    return await at_upstream(up, params)


@pytest.mark.parametrize("era", ["auto", "legacy"])
async def test_official_sdk_server(era: str) -> None:
    command, args = sdk_server_cmd()
    with trio.fail_after(60):
        async with open_stdio_transport("sdk", StdioParams(command, tuple(args))) as t:
            up = Upstream("sdk", t, era=era)
            await up.connect()
            assert up.era == ("modern" if era == "auto" else "legacy")
            assert up.version == ("2026-07-28" if era == "auto" else "2025-11-25")
            listing = await up.list_tools()
            names = sorted(tool.name for tool in listing.tools)
            assert names == ["boom", "count_up", "long_text", "nap", "shout"]
            assert text_of(await call(up, "shout", {"text": "hello"})) == "HELLO"
            failed = decoded(await call(up, "boom", {}))
            assert failed["isError"] is True
            long = text_of(await call(up, "long_text", {"kb": 20}))
            assert len(long) == 20 * 1024
            with pytest.raises(rpc.RPCError) as info:
                await up.request(
                    "no/such/method",
                    mcp.MetaOnlyParams(meta=client_meta(up.version, {}))
                    if up.era == "modern"
                    else None,
                )
            assert info.value.code in (rpc.METHOD_NOT_FOUND, rpc.INVALID_REQUEST)


async def test_everything_server_is_legacy_with_hyphenated_tools() -> None:
    params = StdioParams(node_tool("mcp-server-everything"), ("stdio",), env=node_env())
    seen: list[rpc.Notification] = []
    with trio.fail_after(60):
        async with open_stdio_transport("everything", params, on_notification=seen.append) as t:
            up = Upstream("everything", t)
            await up.connect()
            assert up.era == "legacy"
            assert up.version == "2025-11-25"
            listing = await up.list_tools()
            names = {tool.name for tool in listing.tools}
            assert {"echo", "get-sum", "trigger-long-running-operation"} <= names
            assert text_of(await call(up, "echo", {"message": "hi there"})) == "Echo: hi there"
            assert "5" in text_of(await call(up, "get-sum", {"a": 2, "b": 3}))
            bad = decoded(await call(up, "get-sum", {"a": "two"}))
            assert bad["isError"] is True
            with pytest.raises(rpc.RPCError) as info:
                await up.request("no/such/method", None)
            assert info.value.code == rpc.METHOD_NOT_FOUND


async def test_time_server_from_pypi_is_modern() -> None:
    params = StdioParams(console_script("mcp-server-time"), ("--local-timezone", "UTC"))
    with trio.fail_after(60):
        async with open_stdio_transport("time", params) as t:
            up = Upstream("time", t)
            await up.connect()
            assert up.era == "modern"
            listing = await up.list_tools()
            assert {tool.name for tool in listing.tools} == {"get_current_time", "convert_time"}
            out = decoded(await call(up, "get_current_time", {"timezone": "UTC"}))
            assert "UTC" in text_of(Raw(json.dumps(out).encode()))


async def test_v1_sdk_server_answers_discover_with_invalid_params_and_falls_back() -> None:
    params = StdioParams(v1_python(), (str(SERVERS / "sdk1_server.py"), "stdio"))
    with trio.fail_after(60):
        async with open_stdio_transport("v1", params) as t:
            up = Upstream("v1", t)
            await up.connect()
            assert up.era == "legacy"
            listing = await up.list_tools()
            assert {tool.name for tool in listing.tools} == {"shout", "boom"}
            assert text_of(await call(up, "shout", {"text": "v1"})) == "V1"
            failed = decoded(await call(up, "boom", {"message": "kaboom"}))
            assert failed["isError"] is True and "kaboom" in text_of(
                Raw(json.dumps(failed).encode())
            )


@pytest.mark.parametrize("tool", ["mcp-server-filesystem", "mcp-server-memory"])
async def test_reference_servers(tool: str, tmp_path: Path) -> None:
    if tool == "mcp-server-filesystem":
        (tmp_path / "hello.txt").write_text("hello from a file")
        params = StdioParams(node_tool(tool), (str(tmp_path),), env=node_env())
    else:
        params = StdioParams(
            node_tool(tool), (), env={**node_env(), "MEMORY_FILE_PATH": str(tmp_path / "m.jsonl")}
        )
    with trio.fail_after(60):
        async with open_stdio_transport(tool, params) as t:
            up = Upstream(tool, t)
            await up.connect()
            assert up.era == "legacy"
            listing = await up.list_tools()
            if tool == "mcp-server-filesystem":
                assert "read_text_file" in {x.name for x in listing.tools}
                out = text_of(
                    await call(up, "read_text_file", {"path": str(tmp_path / "hello.txt")})
                )
                assert "hello from a file" in out
                denied = decoded(await call(up, "read_text_file", {"path": "/etc/passwd"}))
                assert denied["isError"] is True
            else:
                assert "read_graph" in {x.name for x in listing.tools}
                await call(
                    up,
                    "create_entities",
                    {
                        "entities": [
                            {"name": "mcpd", "entityType": "daemon", "observations": ["tested"]}
                        ]
                    },
                )
                assert "mcpd" in text_of(await call(up, "read_graph", {}))
