"""Keeping one server's tool list current: notifications, subscriptions, ttl.

A modern server that offers it gets a ``subscriptions/listen`` held open for
tool-list changes (listened to again when it ends); any server's
``notifications/tools/list_changed`` makes the list be fetched again; without a
subscription, an agent listing tools after the list's ttl ran out refreshes it.

Fetching a list is done on the thread that serves every server and agent: its pages
are read, searched for secrets (one that must be taken apart, perhaps in its server's
own thread: ``taking_apart``), decoded and compared with the last list; a changed
one's tools are then cleaned and checked a slice at a time, other tasks running
between slices, and only then is the list installed whole (agents see the old list or
the new one, never part of each). What all of that cost, changed or not, sets when
the list may be fetched again: a list that costs much to fetch is fetched that much
less often, so a server that announces changes of a large list all the time holds a
bounded share of that thread, and `mcpd status` shows it held back while it waits.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Final

import msgspec
import trio

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.pacing.read_budget import HeldBack
from protocol.shown.logfields import log_extra

from ..connected.answer_wait import LIST_FAILURES, AnswerWait, RanOut
from ..connected.upstream import Upstream
from .tool_pages import ListResult

logger = logging.getLogger("mcpd.server")

_MIN_REFRESH: Final = 1.0
# After fetching a list cost T of mcpd's thread, the next fetch waits this many T: the
# server has about a tenth of that thread at most, however large and changing its list.
PAUSE_PER_COST: Final = 9.0
# Other tasks run at least this often while a list is taken in.
_SLICE: Final = 0.02
# More announcements than this for one fetch is a server in a loop, said once a minute.
_FLOOD: Final = 20
_FLOOD_LOG_EVERY: Final = 60.0
_KEPT: Final = (
    "the tools it listed before are served, and its list is asked for again when it "
    "next announces a change or its ttl runs out"
)


class _Honoured(msgspec.Struct):
    toolsListChanged: bool = False


class _Acknowledged(msgspec.Struct):
    notifications: _Honoured = msgspec.field(default_factory=_Honoured)


class ToolListKeeper:
    """``wake`` asks the server's task to come round (it does the fetching);
    ``connected`` says whether there is a session to fetch from; ``install`` puts a
    fetched list in the table and tells whoever needs to know."""

    def __init__(
        self,
        alias: str,
        wake: Callable[[], None],
        connected: Callable[[], bool],
        install: Callable[[list[mcp.Tool]], None],
        read_ahead: Callable[[mcp.Tool], None] = lambda tool: None,
        work_clock: Callable[[], float] = time.perf_counter,
        answers: AnswerWait | None = None,
    ) -> None:
        """``read_ahead`` does the costly part of installing one tool beforehand
        (``ToolTable.read_ahead``); ``work_clock`` measures what taking a list in cost;
        ``answers`` bounds the wait for the server's pages (none: unbounded)."""
        self.alias = alias
        self._wake = wake
        self._connected = connected
        self._install = install
        self._read_ahead = read_ahead
        self._work_clock = work_clock
        self._answers = answers or AnswerWait(alias)
        self._next_fetch = -math.inf
        self._cost = 0.0  # of the last fetch, taking its list in included
        self.held_back: HeldBack | None = None  # waiting longer for what the list cost
        self.subscribed = False
        self._refusal_said = False  # this session: a server may acknowledge at will
        self.due = False
        self._listed_at = -math.inf
        self.ttl_ms = 0
        self.cache_scope: str | None = None
        self.dropped: list[str] = []  # what the last list left out, and why
        self.cut: list[str] = []  # what it kept with less, and why
        self.short = False  # whether it was longer than its limits
        self._announced = 0  # list_changed heard since the last fetch began
        self._flood_logged = -math.inf
        self._held_logged = -math.inf

    def listed(self, listing: ListResult) -> None:
        self._listed_at = trio.current_time()
        self.ttl_ms, self.dropped, self.cut = listing.ttl_ms, listing.dropped, listing.cut
        self.short = listing.short
        self.cache_scope = listing.cache_scope

    def connected(self) -> None:
        self.subscribed = False
        self._refusal_said = False

    def request(self) -> None:
        self.due = True
        self._wake()

    def maybe_refresh(self) -> None:
        """An agent is listing tools: refresh this server's list if it went stale.

        Without a working subscription, a list is fresh for its ttl (at least a second,
        so a burst of listings with a ttl of 0 costs the server one round trip).
        """
        if not self._connected() or self.due or self.subscribed:
            return
        # In milliseconds: a server's ttl may be an integer too large to be a float.
        age_ms = (trio.current_time() - self._listed_at) * 1000
        if age_ms >= max(self.ttl_ms, _MIN_REFRESH * 1000):
            self.request()

    async def refetch(self, up: Upstream) -> None:
        # At most one fetch a second: a server announcing changes in a loop had its
        # list fetched hundreds of times a second. What is announced while this waits
        # is in the list fetched after it.
        await trio.sleep_until(self._listed_at + _MIN_REFRESH)
        if trio.current_time() < self._next_fetch:
            await self._wait_for_turn()
        self.due = False
        if self._announced > _FLOOD:
            now = trio.current_time()
            if now >= self._flood_logged + _FLOOD_LOG_EVERY:
                self._flood_logged = now
                logger.warning(
                    "%s: announced %d tool-list changes in about a second; its list is "
                    "fetched at most once a second, and less often when it costs more "
                    "to fetch",
                    self.alias,
                    self._announced,
                    extra=log_extra(self.alias, reason="tool-list change flood"),
                )
        self._announced = 0
        try:
            with self._answers.bounded("tools/list", _KEPT):
                listing = await up.list_tools()
        except RanOut:
            # The list fetched before stays; the next change announced, or the ttl
            # counted from now, asks again, no sooner than a fetch that ended now.
            self._listed_at = trio.current_time()
            raise
        except LIST_FAILURES as exc:
            # Likewise, the server going on; and what reading the pages it did send
            # cost holds the next fetch back as a list's cost does.
            self._listed_at = trio.current_time()
            self._cost = up.list_cost.seconds
            self._next_fetch = self._listed_at + next_fetch_after(self._cost)
            # What an older list left out is no word on this one: status says it failed.
            self.dropped = []
            self._answers.failed("tools/list", exc, _KEPT)
            return
        self._answers.listed("tools/list")
        self.listed(listing)
        cost = listing.cost
        if not listing.unchanged:
            cost += await self._take_in(listing.tools)
        self._cost = cost
        self._next_fetch = trio.current_time() + next_fetch_after(cost)

    async def _wait_for_turn(self) -> None:
        pause = next_fetch_after(self._cost)
        reason = (
            f"fetching its tool list took {self._cost:.2f} s of mcpd's time: it is "
            f"fetched again {pause:.1f} s after that at the soonest"
        )
        now = trio.current_time()
        self.held_back = HeldBack(reason, now)
        if now >= self._held_logged + _FLOOD_LOG_EVERY:
            self._held_logged = now
            logger.warning(
                "%s: tool list held back: %s",
                self.alias,
                reason,
                extra=log_extra(self.alias, "held_back", reason),
            )
        try:
            await trio.sleep_until(self._next_fetch)
        finally:
            self.held_back = None

    async def _take_in(self, tools: list[mcp.Tool]) -> float:
        """Read the list ahead a slice at a time, then install it; what it cost of the
        time other tasks could not run."""
        clock = self._work_clock
        spent = 0.0
        began = clock()
        for tool in tools:
            self._read_ahead(tool)
            if clock() - began >= _SLICE:
                spent += clock() - began
                await trio.lowlevel.checkpoint()
                began = clock()
        self._install(tools)
        return spent + clock() - began

    def on_notification(self, msg: rpc.Notification) -> None:
        method = msg.method
        if method == "notifications/tools/list_changed":
            self._announced += 1
            self.request()
        elif method == "notifications/subscriptions/acknowledged":
            self._acknowledged(msg)

    def _acknowledged(self, msg: rpc.Notification) -> None:
        try:
            # Only the flag is read: whatever else the server put there is skipped.
            self.subscribed = rpc.decode_as(
                msg.params, _Acknowledged
            ).notifications.toolsListChanged
        except rpc.InvalidParams:
            self.subscribed = False
        if self.subscribed:
            # A change between the list fetched at connect and this subscription was
            # told to nobody: fetch once more now that every later one will be heard.
            self.request()
        elif not self._refusal_said:
            self._refusal_said = True
            logger.info(
                "%s: the server did not take up the tool-list subscription; its list "
                "is refreshed when its ttl runs out",
                self.alias,
                extra=log_extra(self.alias),
            )


def next_fetch_after(cost: float) -> float:
    """How long after a fetch of a list that cost ``cost`` seconds of mcpd's thread
    the list may be fetched again."""
    return max(_MIN_REFRESH, PAUSE_PER_COST * cost)
