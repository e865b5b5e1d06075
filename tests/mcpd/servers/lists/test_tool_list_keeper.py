"""One server's tool list kept current: refreshed by an agent's listing once its ttl
ran out (never more than once a second, never while a subscription tells changes),
fetched again when the server says it changed, and installed only when it did; a
list costly to take in is read ahead in slices and installed whole, and a list costly
to fetch, changed or not, is fetched again only after a pause that grows with what it
cost."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any, cast

import pytest
import trio
import trio.testing
from msgspec import Raw

from mcpd.servers.connected.answer_wait import AnswerWait, RanOut
from mcpd.servers.connected.handshake import BadPage
from mcpd.servers.connected.upstream import Upstream
from mcpd.servers.lists.tool_list_keeper import PAUSE_PER_COST, ToolListKeeper, next_fetch_after
from mcpd.servers.lists.tool_pages import FetchCost, ListResult
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from tests.support.clients.agent import connect, make_config, running
from tests.support.daemons.fault_harness import HOSTILE_STDIO
from tests.support.parts.status_rows import status_text
from tests.support.reading.peak import peak_bytes, size

CHURNING = str(Path(__file__).parents[3] / "support" / "servers" / "churning.py")

ACK = "notifications/subscriptions/acknowledged"


class Lister:
    """An upstream answering tools/list with ``result`` (or raising ``error``, or never
    answering while ``hang``); ``spent`` is what each fetch costs mcpd."""

    def __init__(self) -> None:
        self.result = ListResult([mcp.Tool(name="a")], 0, [], None)
        self.error: Exception | None = None
        self.hang = False
        self.fetches = 0
        self.spent = 0.0
        self.list_cost = FetchCost(lambda: 0.0, lambda: self.spent, lambda: 0.0)

    async def list_tools(self) -> ListResult:
        self.fetches += 1
        if self.hang:
            await trio.sleep_forever()
        if self.error is not None:
            raise self.error
        return self.result


class Keeper:
    def __init__(self, answers: AnswerWait | None = None) -> None:
        self.wakes = 0
        self.connected = True
        self.installed: list[list[str]] = []
        self.keeper = ToolListKeeper(
            "srv", self._wake, lambda: self.connected, self._install, answers=answers
        )

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


async def test_a_list_not_answered_in_time_keeps_the_one_before_and_is_asked_again_later(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The wait for the answer is bounded, not the pause before the fetch; the list
    fetched before stays; the next change announced asks again, a second after the
    request ran out at the soonest, and its answer is taken in."""
    k = Keeper(AnswerWait("srv", lambda: 2.0))
    lister = Lister()
    await k.keeper.refetch(up(lister))
    listed = trio.current_time()
    lister.hang = True
    k.keeper.on_notification(note("notifications/tools/list_changed"))
    with pytest.raises(RanOut, match="tools/list got no answer within 2 s"):
        await k.keeper.refetch(up(lister))
    ran_out = trio.current_time()
    assert ran_out - listed == 1.0 + 2.0  # the pause, then the wait for the answer
    assert k.installed == [["a"]] and not k.keeper.due
    lister.hang = False
    lister.result = ListResult([mcp.Tool(name="a"), mcp.Tool(name="b")], 0, [], None)
    k.keeper.on_notification(note("notifications/tools/list_changed"))
    await k.keeper.refetch(up(lister))
    assert trio.current_time() - ran_out >= 1.0
    assert k.installed == [["a"], ["a", "b"]] and lister.fetches == 3


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


async def test_an_acknowledgement_is_read_for_the_tool_list_only() -> None:
    k = Keeper()
    honoured = {"toolsListChanged": True, "junk": [{}] * 250_000}
    ack = note(ACK, {"notifications": honoured})
    assert peak_bytes(lambda: k.keeper.on_notification(ack)) < 4 * size(ack)
    assert k.keeper.subscribed


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
    await k.keeper.refetch(up(lister))
    assert k.installed == [["a"]]
    assert not k.keeper.due
    k.keeper.maybe_refresh()
    assert not k.keeper.due  # asked for just now
    await trio.sleep(1)
    k.keeper.maybe_refresh()
    assert k.keeper.due


async def test_what_a_failed_fetch_cost_holds_the_next_fetch_back_as_a_whole_ones_does(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    answers = AnswerWait("srv")
    k = Keeper(answers)
    lister = Lister()
    lister.error = BadPage("srv: tools/list did not end after 1000 pages")
    lister.spent = 2.0
    began = trio.current_time()
    with caplog.at_level(logging.INFO, logger="mcpd.server"):
        await k.keeper.refetch(up(lister))
        trouble = answers.trouble
        assert trouble is not None and trouble.reason.startswith(
            "tools/list failed: tools/list did not end after 1000 pages; the tools it listed"
        )
        lister.error = None
        k.keeper.request()
        await k.keeper.refetch(up(lister))
    assert trio.current_time() - began == 2.0 * PAUSE_PER_COST
    assert k.installed == [["a"]] and answers.trouble is None
    said = [r.getMessage() for r in caplog.records]
    assert said[0].startswith("srv: tools/list failed: tools/list did not end after 1000 pages;")
    assert said[-1] == "srv: tools/list succeeded again"


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


def test_a_list_that_cost_more_to_take_in_waits_longer_for_its_next_fetch() -> None:
    assert next_fetch_after(0.0) == next_fetch_after(0.05) == 1.0  # a second at the least
    assert next_fetch_after(2.0) == 2.0 * PAUSE_PER_COST
    # The server holds at most a tenth of mcpd's time, however costly its list.
    for cost in (0.2, 1.0, 3.0, 60.0):
        assert cost / (cost + next_fetch_after(cost)) <= 0.1


class Costly:
    """A keeper whose every tool costs ``per_tool`` seconds of work to read ahead
    (on a clock of its own), recording what ran in between."""

    def __init__(self, per_tool: float) -> None:
        self.per_tool = per_tool
        self.worked = 0.0
        self.events: list[str] = []
        self.keeper = ToolListKeeper(
            "big",
            lambda: None,
            lambda: True,
            lambda tools: self.events.append(f"installed {len(tools)}"),
            self._read,
            lambda: self.worked,
        )

    def _read(self, tool: mcp.Tool) -> None:
        self.worked += self.per_tool
        self.events.append("read")


async def test_a_costly_list_is_read_ahead_in_slices_other_tasks_run_between_then_installed() -> (
    None
):
    costly = Costly(per_tool=0.01)
    lister = Lister()
    lister.result = ListResult([mcp.Tool(name=f"t{i}") for i in range(10)], 0, [], None)

    async def other() -> None:
        while True:
            costly.events.append("other")
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        await trio.lowlevel.checkpoint()
        await costly.keeper.refetch(up(lister))
        nursery.cancel_scope.cancel()
    taken_in = costly.events[costly.events.index("read") :]
    assert taken_in.count("read") == 10
    assert taken_in.index("installed 10") > taken_in.index("other")  # others ran meanwhile
    # Installed whole, once every tool was read ahead.
    last_read = max(i for i, event in enumerate(taken_in) if event == "read")
    assert taken_in.index("installed 10") > last_read


async def test_a_costly_list_is_fetched_again_later_and_shown_held_back_meanwhile(
    autojump_clock: trio.testing.MockClock,
) -> None:
    costly = Costly(per_tool=1.0)
    lister = Lister()
    lister.result = ListResult([mcp.Tool(name="a"), mcp.Tool(name="b")], 0, [], None)
    await costly.keeper.refetch(up(lister))
    taken = trio.current_time()
    assert costly.keeper.held_back is None
    lister.result = ListResult([mcp.Tool(name="c")], 0, [], None)
    costly.keeper.on_notification(note("notifications/tools/list_changed"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(costly.keeper.refetch, up(lister))
        await trio.sleep(10)
        held = costly.keeper.held_back
        assert held is not None and "fetching its tool list took 2.00 s" in held.reason
        assert lister.fetches == 1
    assert lister.fetches == 2
    assert trio.current_time() - taken >= 2.0 * PAUSE_PER_COST
    assert costly.keeper.held_back is None


@pytest.mark.parametrize("unchanged", [False, True])
async def test_the_next_fetch_waits_for_what_the_whole_fetch_cost_changed_or_not(
    autojump_clock: trio.testing.MockClock, unchanged: bool
) -> None:
    # Reading, decoding and comparing a large list cost mcpd as much when it turns
    # out the same as when it changed: a server announcing changes without end is
    # held to the same share either way.
    costly = Costly(per_tool=1.0)
    lister = Lister()
    lister.result = ListResult([mcp.Tool(name="a")], 0, [], None, cost=3.0)
    await costly.keeper.refetch(up(lister))
    fetched = trio.current_time()
    lister.result = ListResult([mcp.Tool(name="a")], 0, [], None, unchanged=unchanged, cost=3.0)
    costly.keeper.on_notification(note("notifications/tools/list_changed"))
    await costly.keeper.refetch(up(lister))
    # The first fetch's reading and the second's tool taken in: 3 s and 1 s.
    assert trio.current_time() - fetched >= 4.0 * PAUSE_PER_COST
    fetched = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(costly.keeper.refetch, up(lister))
        await trio.sleep(1.5)
        held = costly.keeper.held_back
        spent = 3.0 if unchanged else 4.0
        assert held is not None and f"fetching its tool list took {spent:.2f} s" in held.reason
    assert trio.current_time() - fetched >= spent * PAUSE_PER_COST
    assert lister.fetches == 3


class SaidHeldBack(logging.Handler):
    """Sets ``said`` once the journal says the tool list of ``alias`` is held back."""

    def __init__(self, alias: str) -> None:
        super().__init__()
        self.alias = alias
        self.said = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(f"{self.alias}: tool list held back"):
            self.said.set()


async def test_a_server_churning_a_large_list_is_held_back_and_another_servers_calls_go_on(
    tmp_path: Path,
) -> None:
    journal = SaidHeldBack("churn")
    logger = logging.getLogger("mcpd")
    logger.addHandler(journal)
    servers = {
        "churn": {"command": sys.executable, "args": [CHURNING, "450", "32000"], "era": "legacy"},
        "calm": {"command": sys.executable, "args": [HOSTILE_STDIO]},
    }
    try:
        with trio.fail_after(60):
            async with (
                running(make_config(tmp_path, servers)) as daemon,
                connect(daemon.socket_path) as agent,
            ):
                await journal.said.wait()
                shown = status_text(await agent.result("mcpd/status")).splitlines()
                at = next(i for i, row in enumerate(shown) if row.startswith("churn "))
                calm = next(i for i, row in enumerate(shown) if row.startswith("calm "))
                held = [i for i, row in enumerate(shown) if "held back|" in row]
                assert len(held) == 1 and calm < at < held[0]  # under the server, no other
                assert "fetching its tool list took" in shown[held[0]]
                for n in range(20):
                    done = await agent.call("mcp__calm__echo", {"text": str(n)})
                    assert done["content"] == [{"type": "text", "text": f"echo:{n}"}]
                # The churned list is installed whole: every tool, held as changed.
                pending = await agent.result("mcpd/status")
                assert next(s for s in pending["servers"] if s["alias"] == "churn")["tools"] == 450
    finally:
        logger.removeHandler(journal)


async def test_a_failed_fetch_drops_the_older_lists_dropped_and_says_each_new_reason(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """What ``mcpd status`` says a list dropped is of the list last fetched: once a
    fetch fails, it says the failure, not what an older list left out. The journal says
    each new reason a list fails for at once (the same one again, once a minute)."""
    answers = AnswerWait("srv")
    k = Keeper(answers)
    lister = Lister()
    lister.result = ListResult([mcp.Tool(name="a")], 0, ["a: listed twice"], None)
    await k.keeper.refetch(up(lister))
    assert k.keeper.dropped == ["a: listed twice"]
    reasons = ["srv: tools/list cursor 'x' repeated", "srv: tools/list did not end after 9 pages"]
    with caplog.at_level(logging.INFO, logger="mcpd.server"):
        for reason in [reasons[0], reasons[1], reasons[1]]:
            await trio.sleep(5)
            lister.error = BadPage(reason)
            k.keeper.request()
            await k.keeper.refetch(up(lister))
    assert k.keeper.dropped == []
    said = [r.getMessage() for r in caplog.records if r.mcpd_event == "list_failed"]
    assert [m.split("; ")[0] for m in said] == [
        "srv: tools/list failed: tools/list cursor 'x' repeated",
        "srv: tools/list failed: tools/list did not end after 9 pages",
    ]
    trouble = answers.trouble
    assert trouble is not None and "did not end after 9 pages" in trouble.reason
