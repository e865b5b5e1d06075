"""A server announcing tool-list changes in a loop gets its list fetched at most once
a second, and every change it announced is in a list fetched after it."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest
import trio
import trio.testing

from mcpd.servers.connected.upstream import Upstream
from mcpd.servers.lists.tool_list_keeper import ToolListKeeper
from mcpd.servers.lists.tool_pages import ListResult
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

CHANGED = rpc.Notification(method="notifications/tools/list_changed", params=None)


class Lister:
    """An upstream whose list is ``version`` tools, counting the fetches."""

    def __init__(self) -> None:
        self.version = 0
        self.fetched_at: list[float] = []

    async def list_tools(self) -> ListResult:
        self.fetched_at.append(trio.current_time())
        await trio.sleep(0.001)  # a round trip
        tools = [mcp.Tool(name=f"t{i}") for i in range(self.version)]
        return ListResult(tools, 0, [], None)


async def test_a_flood_of_list_changes_costs_one_fetch_a_second(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    installed: list[int] = []
    wake = trio.Event()

    def poke() -> None:
        wake.set()

    keeper = ToolListKeeper("noisy", poke, lambda: True, lambda tools: installed.append(len(tools)))
    up = Lister()

    async def session() -> None:  # as the server's task tends its list
        nonlocal wake
        while True:
            if keeper.due:
                await keeper.refetch(cast(Upstream, up))
                continue
            wake = trio.Event()
            await wake.wait()

    async def flood(seconds: float) -> None:
        for _ in range(int(seconds * 1000)):
            up.version += 1
            keeper.on_notification(CHANGED)
            await trio.sleep(0.001)

    with caplog.at_level(logging.WARNING, logger="mcpd.server"):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session)
            await flood(5.0)
            await trio.sleep(3)  # the last change's fetch
            nursery.cancel_scope.cancel()
    gaps = [b - a for a, b in zip(up.fetched_at, up.fetched_at[1:], strict=False)]
    assert 4 <= len(up.fetched_at) <= 7, up.fetched_at
    assert all(gap >= 1.0 for gap in gaps), gaps
    assert installed[-1] == up.version == 5000, "the last change was never fetched"
    warned = [r.getMessage() for r in caplog.records if "tool-list changes" in r.getMessage()]
    assert len(warned) == 1 and "at most once a second" in warned[0]


async def test_a_single_change_after_a_quiet_while_is_fetched_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    keeper = ToolListKeeper("calm", lambda: None, lambda: True, lambda tools: None)
    up = Lister()
    await trio.sleep(10)
    keeper.on_notification(CHANGED)
    start = trio.current_time()
    await keeper.refetch(cast(Any, up))
    assert up.fetched_at == [start]
