"""Where a server's result is made fit for agents (``rpc_results``), and whether it is;
and so for the data of a server's error (``rpc_errors``), which is counted and taken
apart as a result is, and named in what is said of its size as ``data_of`` names it.

Most results go on as the bytes they came as (``rpc_results.findings``). One that must
be taken apart is decoded whole, walked in Python and encoded again, and what that
costs (the thread that does it held, the memory its values take) grows with the values
and keys in it, not with its bytes: fifteen megabytes of ``[{},{},...]`` are five
million objects and seconds of Python. So before anything decodes it, that number is
told from its bytes (``protocol.lines.json_values``), and ``ReplyWork.at_once`` says where
the work goes:

- a reply of at most ``AT_ONCE_PARTS`` values and keys (nearly every one that needs
  it) is taken apart at once, where it arrived;
- one of at most ``MOST_PARTS`` in a worker thread of its server's own, one reply at
  a time: one server's big replies wait for each other, never for another server's,
  and the event loop serves everyone meanwhile;
- one of more is not taken apart: the request it answers fails with an error that
  names its size (``TooComplex``), and the server and its other requests go on. A
  notification is not worth a thread: one past ``AT_ONCE_PARTS`` that needs taking
  apart is dropped, and the journal says so (a task's status, dropped so, is still
  what ``tasks/get`` answers).

What taking a server's results apart took, in its thread or where a request's result
arrived, adds up in ``ReplyWork.worked``: what fetching a tool list cost counts it
(``Upstream.list_tools``), as it counts the transport's ``read_work``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final, TypeVar

import trio
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply
from protocol.lines.json_values import parts_at_most
from protocol.pacing.buckets import Throttle
from protocol.shown.logfields import log_extra
from protocol.shown.visible import METHOD_SHOWN, quote

from ...policy.redaction.guard import SecretGuard
from ...registry.text import own_keys
from .rpc_errors import data_findings, error_for_agents
from .rpc_results import Findings, findings, taken_apart

logger = logging.getLogger("mcpd.askback")

T = TypeVar("T")

# Values and keys a reply may hold and still be taken apart where it arrived: a few
# milliseconds of decoding and walking.
AT_ONCE_PARTS: Final = 10_000
# And at all, in its server's thread: what the decode holds the event loop for (a
# decode lets no other thread run) and the memory the values take stay near what a
# line of ``max_line_bytes`` takes by itself.
MOST_PARTS: Final = 250_000
_may_hold_own: Final = own_keys.may_hold


def data_of(what: str) -> str:
    """How an error's data is named in what is said of its size (``at_once``)."""
    return f"the data of {what}"


class TooComplex(MalformedReply):
    """A reply mcpd would have to take apart, holding more values than it takes apart:
    only the request it answers fails. The server is up."""


def too_complex(alias: str, raw: Raw | bytes, what: str, why: str) -> str | None:
    """Why ``raw`` holds too many values and keys to be read into values (to do
    ``why``), in words that name its size; None when it does not."""
    if len(raw) <= 2 * MOST_PARTS:
        return None
    parts = parts_at_most(raw, MOST_PARTS)
    if parts <= MOST_PARTS:
        return None
    return (
        f"{alias}: {what} of {len(raw):,} bytes holds up to {parts:,} values and keys, "
        f"more than the {MOST_PARTS:,} mcpd reads (to {why})"
    )


class ReplyWork:
    """Where one server's replies are taken apart: at once, in its own worker thread
    (one reply at a time), or not at all."""

    def __init__(
        self, alias: str, guard: SecretGuard, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        """``clock`` measures what the work took (``worked``)."""
        self.alias = alias
        self.guard = guard
        self._clock = clock
        # Seconds taking its results apart took so far, in its thread or where a
        # request's result arrived (what a transport's ``read_work`` does not count).
        # A thread's work counts whole: while it runs Python it holds the interpreter
        # lock the event loop needs too.
        self.worked = 0.0
        # Whether the server spoke a legacy era when it last greeted mcpd: its results'
        # ``resultType`` is then left out (``rpc_results.findings``).
        self.legacy = False
        self._thread = trio.CapacityLimiter(1)
        # Where replies taken apart for a caller that does not wait wait for the thread
        # (``in_thread``), while ``run`` runs.
        self._waiting: trio.Nursery | None = None
        # A server can send notifications without end: few drops are logged, the rest
        # counted in the next line that is.
        self._said = Throttle()

    def at_once(self, raw: Raw | bytes, what: str, why: str) -> bool:
        """Whether ``raw`` is taken apart at once (else in the server's thread, ``run``).
        Raises TooComplex for one mcpd does not take apart at all; ``what`` and ``why``
        ("a tools/call result", "drop ...") are for its words."""
        size = len(raw)
        # Each value or key but the first follows a separator: not many in a short text.
        if size <= 2 * AT_ONCE_PARTS:
            return True
        parts = parts_at_most(raw, MOST_PARTS)
        if parts <= AT_ONCE_PARTS:
            return True
        if parts > MOST_PARTS:
            reason = (
                f"{self.alias}: {what} of {size:,} bytes holds up to {parts:,} values "
                f"and keys, more than the {MOST_PARTS:,} mcpd takes apart (to {why}), "
                "and was dropped"
            )
            self._tell(reason)
            raise TooComplex(reason)
        return False

    def _tell(self, reason: str) -> None:
        held = self._said.admit()
        if held is not None:
            more = f" ({held} more like this not logged)" if held else ""
            logger.warning(
                "%s%s", reason, more, extra=log_extra(self.alias, "reply_too_complex", reason)
            )

    async def in_worker(self, work: Callable[[], T]) -> T:
        """``work`` done in the server's worker thread, after any other of its replies';
        what it took there (not its wait for the thread) is counted in ``worked``."""
        clock = self._clock
        took = [0.0]

        def timed() -> T:
            began = clock()
            try:
                return work()
            finally:
                took[0] = clock() - began

        try:
            return await trio.to_thread.run_sync(timed, limiter=self._thread)
        finally:
            self.worked += took[0]

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold what ``in_thread`` needs for as long as the server's attempt lasts."""
        async with trio.open_nursery() as waiting:
            self._waiting = waiting
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._waiting = None

    def in_thread(self, work: Callable[[], T], then: Callable[[T | MalformedReply], None]) -> bool:
        """Do ``work`` (taking a reply apart) in the server's thread and hand ``then``
        what came of it, for a caller that cannot wait (a reply's callback). False when
        nothing runs to wait in (no attempt at the server): the caller does it at once."""
        if self._waiting is None:
            return False
        self._waiting.start_soon(self._then, work, then)
        return True

    async def _then(
        self, work: Callable[[], T], then: Callable[[T | MalformedReply], None]
    ) -> None:
        done: T | MalformedReply
        try:
            # Its caller is owed what came of it even when the attempt ends meanwhile,
            # and the work is bounded (``MOST_PARTS``).
            with trio.CancelScope(shield=True):
                done = await self.in_worker(work)
        except MalformedReply as exc:
            done = exc
        then(done)

    async def result(self, raw: Raw, what: str, *, task: bool = False) -> Raw:
        """``raw`` (a result) as agents may get it (``rpc_results.taken_apart``,
        ``task`` as for ``findings``), taken apart where its size says. What it took is
        counted in ``worked``, its search included."""
        guard, alias, clock = self.guard, self.alias, self._clock
        began = clock()
        try:
            found = findings(guard, alias, raw, task=task, legacy=self.legacy)
            if found is None:
                return raw
            if self.at_once(raw, what, found.why):
                return taken_apart(guard, alias, raw, what, found, task=task)
        finally:
            self.worked += clock() - began
        return await self.in_worker(lambda: taken_apart(guard, alias, raw, what, found, task=task))

    async def error(self, exc: rpc.RPCError, what: str) -> rpc.RPCError:
        """``exc`` (a server's error) as agents may get it (``rpc_errors``), its data
        taken apart where its size says, as a result is (raising TooComplex for data
        too large for that). What it took is counted in ``worked``."""
        guard, alias, clock = self.guard, self.alias, self._clock
        began = clock()
        try:
            found, data = data_findings(guard, alias, exc), exc.data
            if (
                found is None
                or not isinstance(data, Raw)
                or self.at_once(data, data_of(what), found.why)
            ):
                return error_for_agents(guard, alias, exc, what, found)
        finally:
            self.worked += clock() - began
        return await self.in_worker(lambda: error_for_agents(guard, alias, exc, what, found))

    def notification(self, params: Raw, method: str, *, task: bool = False) -> Raw | None:
        """A notification's ``params`` as agents may get them (without what the server
        put under mcpd's keys, every secret masked; a task's status, ``task``, made as a
        ``tasks/get`` result is); None: too many values to take apart for that, dropped."""
        guard, alias = self.guard, self.alias
        own = _may_hold_own(params)
        secret = guard.finds(alias, params)
        if not (own or secret or task):
            return params
        why = Findings(own, secret).why
        shown = f"a {quote(method, METHOD_SHOWN)} notification"
        try:
            if not self.at_once(params, shown, why):
                self._tell(
                    f"{alias}: {shown} of {len(params):,} bytes holds more than the "
                    f"{AT_ONCE_PARTS:,} values and keys mcpd takes apart in a notification "
                    f"(to {why}), and was dropped"
                )
                return None
        except TooComplex:
            return None
        what = f"a {method} notification"
        if task:
            try:
                return taken_apart(guard, alias, params, what, Findings(own, secret), task=True)
            except MalformedReply:
                return None  # what it asks is unfit to pass on: said in the journal
        if own:
            params = own_keys.meta_dropped(params)
        # Searched again when encoded again: a secret the server spelled with escapes
        # is plain in mcpd's bytes (``rpc_results.written``).
        return guard.raw(alias, params, what)
