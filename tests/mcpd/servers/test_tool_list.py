"""One server's tool list kept current: refreshed by an agent's listing once its ttl
ran out (never more than once a second, never while a subscription tells changes),
fetched again when the server says it changed, and installed only when it did."""

from __future__ import annotations

import json
import logging
from typing import Any, cast

import pytest
import trio
import trio.testing
from msgspec import Raw

from mcpd.servers.tool_list import ToolListKeeper
from mcpd.servers.tool_pages import ListResult
from mcpd.servers.upstream import Upstream
from protocol import jsonrpc as rpc
from protocol import mcp

ACK = "notifications/subscriptions/acknowledged"


class Lister:
    """An upstream answering tools/list with ``result`` (or raising ``error``)."""

    def __init__(self) -> None:
        self.result = ListResult([mcp.Tool(name="a")], 0, [], None)
        self.error: Exception | None = None
        self.fetches = 0

    async def list_tools(self) -> ListResult:
        self.fetches += 1
        if self.error is not None:
            raise self.error
        return self.result


class Keeper:
    def __init__(self) -> None:
        self.wakes = 0
        self.connected = True
        self.installed: list[list[str]] = []
        self.keeper = ToolListKeeper("srv", self._wake, lambda: self.connected, self._install)

    def _wake(self) -> None:
        self.wakes += 1

    def _install(self, tools: list[mcp.Tool]) -> None:
        self.installed.append([t.name for t in tools])


def note(method: str, params: Any = None) -> rpc.Notification:
    raw = None if params is None else Raw(json.dumps(params).encode())
    return rpc.Notification(method=method, params=raw)


def up(lister: Lister) -> Upstream:
    return cast(Upstream, lister)


async def test_a_listing_after_the_ttl_asks_for_a_refresh_and_not_before(
    autojump_clock: trio.testing.MockClock,
) -> None:
    k = Keeper()
    lister = Lister()
    lister.result = ListResult([mcp.Tool(name="a")], 30_000, [], None)
    await k.keeper.refetch(up(lister))
    k.keeper.maybe_refresh()
    assert not k.keeper.due and k.wakes == 0
    await trio.sleep(29.9)
    k.keeper.maybe_refresh()
    assert not k.keeper.due
    await trio.sleep(0.1)
    k.keeper.maybe_refresh()
    assert k.keeper.due and k.wakes == 1
    k.keeper.maybe_refresh()  # already asked for: once
    assert k.wakes == 1


async def test_a_ttl_of_zero_still_costs_at_most_one_fetch_a_second(
    autojump_clock: trio.testing.MockClock,
) -> None:
    k = Keeper()
    lister = Lister()
    lister.result = ListResult([], 0, [], None)
    await k.keeper.refetch(up(lister))
    for _ in range(100):
        k.keeper.maybe_refresh()
    assert not k.keeper.due
    await trio.sleep(1.0)
    k.keeper.maybe_refresh()
    assert k.keeper.due


async def test_no_refresh_while_disconnected_or_subscribed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    k = Keeper()
    await trio.sleep(100)
    k.connected = False
    k.keeper.maybe_refresh()
    assert not k.keeper.due
    k.connected = True
    k.keeper.on_notification(note(ACK, {"notifications": {"toolsListChanged": True}}))
    assert k.keeper.subscribed
    k.keeper.due = False
    k.keeper.maybe_refresh()
    assert not k.keeper.due
    k.keeper.connected()  # a new session: no subscription yet
    k.keeper.maybe_refresh()
    assert k.keeper.due


async def test_a_taken_up_subscription_fetches_once_more_and_a_refused_one_is_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    k = Keeper()
    k.keeper.on_notification(note(ACK, {"notifications": {"toolsListChanged": True}}))
    assert k.keeper.subscribed and k.keeper.due and k.wakes == 1
    with caplog.at_level(logging.INFO, logger="mcpd.server"):
        k.keeper.on_notification(note(ACK, {"notifications": {"promptsListChanged": True}}))
    assert not k.keeper.subscribed
    assert any(
        "did not take up the tool-list subscription" in r.getMessage() for r in caplog.records
    )


async def test_a_refused_subscription_is_said_once_a_session_however_often_it_is_acknowledged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    k = Keeper()
    refused = note(ACK, {"notifications": {}})
    with caplog.at_level(logging.INFO, logger="mcpd.server"):
        for _ in range(100):
            k.keeper.on_notification(refused)
        k.keeper.connected()
        k.keeper.on_notification(refused)
    said = [r.getMessage() for r in caplog.records]
    assert (
        said
        == [
            "srv: the server did not take up the tool-list subscription; its list "
            "is refreshed when its ttl runs out"
        ]
        * 2
    )


@pytest.mark.parametrize(
    "params",
    [None, [1], "x", 5, {"notifications": [True]}, {"notifications": {"toolsListChanged": False}}],
)
async def test_an_acknowledgement_without_the_tool_list_is_no_subscription(params: Any) -> None:
    k = Keeper()
    k.keeper.subscribed = True
    k.keeper.on_notification(note(ACK, params))
    assert not k.keeper.subscribed
    assert not k.keeper.due


async def test_a_fetched_list_is_installed_only_when_it_changed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    k = Keeper()
    lister = Lister()
    lister.result = ListResult(
        [mcp.Tool(name="a")], 5000, ["b: bad schema"], "private", cut=["x"], short=True
    )
    k.keeper.on_notification(note("notifications/tools/list_changed"))
    assert k.keeper.due and k.wakes == 1
    await k.keeper.refetch(up(lister))
    assert not k.keeper.due and k.installed == [["a"]]
    assert (k.keeper.ttl_ms, k.keeper.dropped, k.keeper.cut) == (5000, ["b: bad schema"], ["x"])
    assert k.keeper.short and k.keeper.cache_scope == "private"
    lister.result = ListResult([mcp.Tool(name="a")], 0, [], None, unchanged=True)
    await k.keeper.refetch(up(lister))
    assert k.installed == [["a"]]
    assert k.keeper.dropped == [] and not k.keeper.short
    assert lister.fetches == 2


async def test_a_failed_fetch_keeps_the_list_and_leaves_the_next_listing_to_ask_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    k = Keeper()
    lister = Lister()
    await k.keeper.refetch(up(lister))
    await trio.sleep(5)
    lister.error = rpc.RPCError(-32603, "internal")
    k.keeper.request()
    with pytest.raises(rpc.RPCError):
        await k.keeper.refetch(up(lister))
    assert k.installed == [["a"]]
    assert not k.keeper.due
    k.keeper.maybe_refresh()
    assert k.keeper.due


async def test_other_notifications_change_nothing() -> None:
    k = Keeper()
    for method in ("notifications/prompts/list_changed", "notifications/message", "x"):
        k.keeper.on_notification(note(method, {"notifications": {"toolsListChanged": True}}))
    assert not k.keeper.due and not k.keeper.subscribed and k.wakes == 0


async def test_a_ttl_too_large_for_a_float_keeps_the_list_fresh_and_listing_works(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A server's ttlMs is any JSON integer; one of hundreds of digits decodes, and was
    # turned into seconds as a float on every agent's listing, which overflowed.
    k = Keeper()
    lister = Lister()
    lister.result = ListResult([mcp.Tool(name="a")], rpc.decode_as(b"9" * 400, int), [], None)
    await k.keeper.refetch(up(lister))
    await trio.sleep(10**9)
    k.keeper.maybe_refresh()
    assert not k.keeper.due and k.wakes == 0
