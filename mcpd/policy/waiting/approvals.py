"""Calls that wait for a person: the approvals registry.

A call the policy says to ``ask`` about is held here until someone decides it: the
agent's user, when the agent can be asked (``asking``), or the operator with ``mcpd
approvals``; whoever answers first decides. A call nobody decides within its rule's
timeout is refused, and one the agent stops waiting for (cancelled, disconnected) is
removed at once. Nothing here holds a server slot: the call has not been sent.

An approval may be remembered for the rest of the agent's connection (``remembered``).
A tool defined anew (taken under ``warn``, or approved with ``mcpd approve``) is asked
about again: approving a definition is not approving its calls.
Each agent may have only so many calls waiting, keeping only so many bytes, so that no
agent can bury the operator's list or fill mcpd's memory; all agents together too.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Final, Literal

import msgspec
import trio

from ...status_document import PendingView
from ..agent import AgentInfo
from ..deciders.kin import AgentKin, Decider, Tie
from ..deciders.kin_refusals import not_yours
from .remembered import RememberedApprovals

TIMEOUT: Final = "timeout"  # who "decided" a call nobody decided in time
PUSHED_OUT: Final = "room for another agent"  # who "decided" a call that gave its place up
PER_AGENT: Final = 32
TOTAL: Final = 1024
# What a waiting call keeps (its arguments, the state and answers it carries back to its
# server, its _meta) is held for as long as it waits, each up to a whole line: at the
# counts alone, waiting calls could hold more than the service may have.
PER_AGENT_BYTES: Final = 32 * 1024 * 1024
TOTAL_BYTES: Final = 256 * 1024 * 1024
# The letters of an id's tail: none that reads as another.
_ID_LETTERS: Final = "abcdefghjkmnpqrstuvwxyz23456789"
_ID_TAIL: Final = 4

ApprovalOutcome = Literal["approved", "denied", "unanswered"]


class ApprovalRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a person is asked about. ``arguments`` is the call's arguments at a glance
    (``shown.showing``): JSON text, mcpd's secrets masked, every key shown where they fit,
    long values shortened in place; ``whole`` writes them whole."""

    agent: AgentInfo
    kin: AgentKin  # who may not decide it
    tool: str  # as the agent called it
    server: str
    original: str  # the server's own name for it
    arguments: str
    shortened: bool = False  # a value is shortened in ``arguments``
    keys_left_out: int = 0  # keys ``arguments`` had no room for
    whole: Callable[[], str] | None = None  # None: ``arguments`` is all of them
    rule: int | None = None
    reason: str | None = None

    def whole_arguments(self) -> str:
        return self.arguments if self.whole is None else self.whole()


class Verdict(msgspec.Struct, frozen=True):
    outcome: ApprovalOutcome
    by: str  # "the agent's user", "uid 1000 (alice)", "timeout", "remembered"
    reason: str | None = None
    # False: a reload restarted the call's server while it waited, so an approval is
    # for this call alone, never remembered for the connection.
    lasting: bool = True

    @property
    def approved(self) -> bool:
        return self.outcome == "approved"


class ApprovalError(Exception):
    """A decision or a request the registry refuses; the message says why."""


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


# What the rules say now of a waiting call: a verdict that ends its wait, or None
# while it is still a person's to decide.
Overrule = Callable[[], "Verdict | None"]


class ApprovalWait:
    """One call held until a person decides it, or its timeout does."""

    __slots__ = (
        "asked",
        "deadline",
        "event",
        "id",
        "kept",
        "overrule",
        "request",
        "since",
        "verdict",
    )

    def __init__(
        self,
        id: str,
        request: ApprovalRequest,
        since: float,
        timeout: float,
        asked: str,
        kept: int,
        overrule: Overrule | None,
    ) -> None:
        self.id = id
        self.request = request
        self.kept = kept  # bytes the call keeps while it waits
        self.overrule = overrule
        self.since = since  # wall-clock time
        self.deadline = since + timeout
        self.asked = asked
        self.event = trio.Event()
        self.verdict: Verdict | None = None

    def view(self) -> PendingView:
        r = self.request
        return PendingView(
            id=self.id,
            agent=r.agent,
            tool=r.tool,
            server=r.server,
            original=r.original,
            arguments=r.arguments,
            shortened=r.shortened,
            keys_left_out=r.keys_left_out,
            rule=r.rule,
            reason=r.reason,
            asked=self.asked,
            since=_iso(self.since),
            deadline=_iso(self.deadline),
        )


# Asks the agent's user about a request: their verdict, or None when the agent cannot
# be asked (it never raises).
AgentAnswer = Callable[[ApprovalRequest], Awaitable[Verdict | None]]


class Approvals:
    def __init__(
        self, wall: Callable[[], float] = time.time, changed: Callable[[], None] = lambda: None
    ) -> None:
        """``changed``: called whenever a call begins or ends waiting, or is decided."""
        self._wall = wall
        self._on_change = changed
        self._pending: dict[str, ApprovalWait] = {}
        self.remembered = RememberedApprovals()  # for the rest of a connection
        self._issued = 0  # ids given
        self.version = 0
        self._changed = trio.Event()

    # -- the call's side --

    async def ask(
        self,
        request: ApprovalRequest,
        within: float,
        agent_answer: AgentAnswer | None = None,
        kept: int = 0,
        overrule: Overrule | None = None,
        opened: Callable[[str, float], None] | None = None,
    ) -> Verdict:
        """Hold the call, which keeps ``kept`` bytes while it waits, until it is
        decided, or ``within`` seconds pass. With ``agent_answer``, the agent's user is
        asked at the same time; its verdict decides unless the operator was first
        (None: the agent could not answer, and the operator still can). ``overrule``
        says what the rules decide of it once they change; ``opened`` is told its id
        and how long it waits, once it waits. Raises ``ApprovalError``
        when the agent already has too many calls waiting, or calls keeping too many
        bytes."""
        asked = "agent" if agent_answer else "operator"
        pending = self._open(request, within, asked, kept, overrule)
        if opened is not None:
            opened(pending.id, within)
        try:
            async with trio.open_nursery() as nursery:
                if agent_answer is not None:
                    nursery.start_soon(self._agent_decides, pending, agent_answer)
                with trio.move_on_after(within):
                    await pending.event.wait()
                nursery.cancel_scope.cancel()
        finally:
            self._close(pending)
        if pending.verdict is None:
            return Verdict("unanswered", TIMEOUT, f"nobody decided within {within:g} s")
        return pending.verdict

    async def _agent_decides(self, pending: ApprovalWait, answer: AgentAnswer) -> None:
        verdict = await answer(pending.request)
        if verdict is not None and pending.verdict is None:
            self._settle(pending, verdict)

    def _open(
        self,
        request: ApprovalRequest,
        timeout: float,
        asked: str,
        kept: int,
        overrule: Overrule | None,
    ) -> ApprovalWait:
        key = request.agent.key
        mine = [p for p in self._pending.values() if p.request.agent.key == key]
        if len(mine) >= PER_AGENT:
            raise ApprovalError(
                f"{PER_AGENT} calls of this agent already wait for approval; "
                "wait for them to be decided"
            )
        held = sum(p.kept for p in mine)
        if held + kept > PER_AGENT_BYTES:
            raise ApprovalError(
                f"the calls of one agent waiting for approval may keep {_mib(PER_AGENT_BYTES)}"
                f" of arguments and state; this agent's keep {_mib(held)}, and this call"
                f" {_mib(kept)}: wait for them to be decided, or send less"
            )
        if len(self._pending) >= TOTAL:
            self._make_room(key)
        self._make_bytes_room(key, kept)
        pending = ApprovalWait(
            self._new_id(), request, self._wall(), timeout, asked, kept, overrule
        )
        self._pending[pending.id] = pending
        self._bump()
        return pending

    def _new_id(self) -> str:
        """An id no other call of this daemon's life has had, or will: what a person
        read as one call's id names that call or none, however many calls come and go
        before they type it. Its count is never given twice; its tail is drawn for
        each call, so that an id read before a restart names no call after it."""
        self._issued += 1
        tail = "".join(secrets.choice(_ID_LETTERS) for _ in range(_ID_TAIL))
        return f"{self._issued}-{tail}"

    def _make_room(self, key: str) -> None:
        """All places taken: the newest call of the agent that holds the most of them
        gives its place up (it is refused as unanswered), when that agent holds more
        than ``key``'s would with its call; else ``key``'s call is refused. Many agents
        of one user (32 processes at 32 calls each) no longer keep out every other."""
        waiting = [p for p in self._pending.values() if p.verdict is None]
        held = Counter(p.request.agent.key for p in waiting)
        top, most = held.most_common(1)[0] if held else ("", 0)
        if most <= held[key] + 1:
            raise ApprovalError(f"{TOTAL} calls already wait for approval")
        newest = max((p for p in waiting if p.request.agent.key == top), key=lambda p: p.since)
        reason = f"{TOTAL} calls waited for approval, the most of them this agent's"
        self._settle(newest, Verdict("unanswered", PUSHED_OUT, reason))

    def _make_bytes_room(self, key: str, kept: int) -> None:
        """``_make_room`` for bytes: while the waiting calls and ``key``'s new one
        would keep more than ``TOTAL_BYTES``, the newest call of the agent whose calls
        keep the most gives its place up, when they keep more than ``key``'s would;
        else ``key``'s call is refused."""
        while True:
            waiting = [p for p in self._pending.values() if p.verdict is None]
            total = sum(p.kept for p in waiting)
            if total + kept <= TOTAL_BYTES:
                return
            held: Counter[str] = Counter()
            for p in waiting:
                held[p.request.agent.key] += p.kept
            top, most = held.most_common(1)[0]
            if most <= held[key] + kept:
                raise ApprovalError(
                    f"the calls waiting for approval may keep {_mib(TOTAL_BYTES)} of arguments"
                    f" and state in all; they keep {_mib(total)}, and this call"
                    f" {_mib(kept)}"
                )
            newest = max((p for p in waiting if p.request.agent.key == top), key=lambda p: p.since)
            reason = (
                f"the calls waiting for approval kept {_mib(TOTAL_BYTES)} of arguments and"
                " state, the most of it this agent's"
            )
            self._settle(newest, Verdict("unanswered", PUSHED_OUT, reason))

    def _close(self, pending: ApprovalWait) -> None:
        if self._pending.pop(pending.id, None) is not None:
            self._bump()

    # -- the operator's side --

    def list(self) -> list[PendingView]:
        """What waits, oldest first (a call just decided waits no more)."""
        waiting = [p for p in self._pending.values() if p.verdict is None]
        return [p.view() for p in sorted(waiting, key=lambda p: p.since)]

    def waiting(self, id: str) -> tuple[PendingView, ApprovalRequest]:
        """The pending call ``id``, as listed and as asked about."""
        pending = self._waiting(id)
        return pending.view(), pending.request

    def _waiting(self, id: str) -> ApprovalWait:
        pending = self._pending.get(id)
        if pending is None or pending.verdict is not None:
            raise ApprovalError(
                f"no call waits for approval under {id!r} (an id is never given to"
                " another call: the one it named, if any, is over)"
            )
        return pending

    def decide(
        self,
        id: str,
        approve: bool,
        by: str,
        reason: str | None = None,
        deciders: Sequence[Decider] = (),
        why_not: Callable[[AgentKin, Tie, int | None], str] | None = None,
        refuse_others: Callable[[], None] = lambda: None,
    ) -> PendingView:
        """Decide the pending call ``id``. ``deciders``: who decides, none of whom may
        be kin to the agent that asked (``AgentKin.tie``); ``why_not`` words the
        refusal (``not_yours``, unless given). ``refuse_others`` then raises where they
        may not decide for another reason (kin to another agent)."""
        pending = self._waiting(id)
        kin = pending.request.kin
        for decider in deciders:
            tie = kin.tie(decider)
            if tie is not None:
                raise ApprovalError((why_not or not_yours)(kin, *tie))
        refuse_others()
        verdict = Verdict("approved" if approve else "denied", by, reason)
        self._settle(pending, verdict)
        return pending.view()

    def overrule(self) -> int:
        """The rules changed: each waiting call they now decide themselves ends at
        once, with their verdict. How many ended."""
        ended = 0
        for pending in list(self._pending.values()):
            if pending.verdict is not None or pending.overrule is None:
                continue
            verdict = pending.overrule()
            if verdict is not None:
                self._settle(pending, verdict)
                ended += 1
        return ended

    def _settle(self, pending: ApprovalWait, verdict: Verdict) -> None:
        pending.verdict = verdict
        pending.event.set()
        self._bump()

    async def wait_change(self, after: int) -> int:
        """Until the registry changed since version ``after``; the version now."""
        while self.version <= after:
            await self._changed.wait()
        return self.version

    def _bump(self) -> None:
        self.version += 1
        self._changed.set()
        self._changed = trio.Event()
        self._on_change()
