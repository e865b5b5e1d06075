"""Interop: the official ``mcp`` SDK client against the demo servers, both eras."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.demo import MODERN, TICKETS, spawn_http

mcp_sdk = pytest.importorskip("mcp")

pytestmark = pytest.mark.interop

EXPECTED_ERA = {"auto": MODERN, "legacy": "2025-11-25"}


async def list_all(client: Any) -> list[str]:
    names: list[str] = []
    cursor = None
    for _ in range(10):
        page = await client.list_tools(cursor=cursor)
        names += [t.name for t in page.tools]
        cursor = page.next_cursor
        if not cursor:
            return names
    raise AssertionError("tools/list never ended")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sdk_client_on_notes_stdio(mode: str) -> None:
    server = mcp_sdk.StdioServerParameters(command=sys.executable, args=["-m", "mcpd.demo.notes"])
    with trio.fail_after(30):
        async with mcp_sdk.Client(server, mode=mode) as client:
            assert client.session.protocol_version == EXPECTED_ERA[mode]
            assert await list_all(client) == ["search", "read_note", "list_notes"]
            result = await client.call_tool("read_note", {"name": "handbook"})
            assert not result.is_error
            assert len(result.content[0].text) > 20_000


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sdk_client_on_tickets_http(mode: str, tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with spawn_http(TICKETS, tmp_path) as port:
            url = f"http://127.0.0.1:{port}/mcp"
            async with mcp_sdk.Client(url, mode=mode) as client:
                assert client.session.protocol_version == EXPECTED_ERA[mode]
                assert await list_all(client) == ["search", "get_ticket", "create_ticket"]
                result = await client.call_tool("search", {"query": "login"})
                assert not result.is_error
                assert "T-1" in result.content[0].text
                bad = await client.call_tool("get_ticket", {"id": "T-99"})
                assert bad.is_error
