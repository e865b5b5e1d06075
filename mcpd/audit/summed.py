"""Requests mcpd refused itself before any server or rule saw them (an unknown or held
name, a request it could not read, one turned away at the connection): an agent can
send those as fast as it can write, and each costs mcpd next to nothing, so they are
what a flood of the audit log is made of.

Each agent (``process_key``: its uid, pid and program) has a budget of them recorded one
by one, ``BURST`` at once and then ``RATE`` a second, which no mistake of a working
agent's comes near; and each user (uid) one for all of its processes together,
``USER_BURST`` and ``USER_RATE``, so that a flood spread over many processes is held
to it as well. Past either, they are counted: per agent, method and outcome, one
summary a writer batch, which is a record of the first of them with ``count`` (how
many), its sizes added up and ``last_ts`` (when the last came). Every request is still
in the file, and the file grows by a few lines a second per agent however fast it
sends; the calls of other agents keep their room in the buffer. The first summary in
a while is also a warning in the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final, TypeVar

import msgspec
from msgspec import UnsetType

from protocol.pacing.buckets import Bucket, Throttle
from protocol.shown.logfields import log_extra
from protocol.shown.visible import visible

from .record import CallRecord, ProcessKey, iso, process_key, stamp

BURST: Final = 100
RATE: Final = 10.0
# A user's processes together: a few agents' worth, so that one of them past its own
# budget leaves the others theirs.
USER_BURST: Final = 4 * BURST
USER_RATE: Final = 4 * RATE
# How often at most the log says an agent's requests are being counted.
WARN_EVERY: Final = 60.0

logger = logging.getLogger("mcpd.audit")

_Key = tuple[ProcessKey, str, str]  # the agent's, the method, the outcome
_K = TypeVar("_K")


class Summed:
    """The agents' budgets, and the summaries of what went past them since the last
    writer batch (``take``), kept by the event loop; the warning is the writer's."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._budgets: dict[ProcessKey, Bucket] = {}
        self._users: dict[int | None, Bucket] = {}  # by uid (None: not known)
        self._summaries: dict[_Key, CallRecord] = {}
        self._warning = Throttle(burst=1, every=WARN_EVERY, clock=clock)

    def within_budget(self, record: CallRecord) -> bool:
        """Whether ``record`` is written one by one; its agent's budget is taken from,
        and while that has room, its user's."""
        key = process_key(record.agent)
        now = self._clock()
        budget = self._budgets.get(key)
        if budget is None:
            budget = self._budgets[key] = Bucket(tokens=float(BURST), stamp=now)
        if not budget.take(now, BURST, RATE):
            return False
        uid = record.agent.uid
        users = self._users.get(uid)
        if users is None:
            users = self._users[uid] = Bucket(tokens=float(USER_BURST), stamp=now)
        return users.take(now, USER_BURST, USER_RATE)

    def add(self, record: CallRecord) -> bool:
        """``record`` counted in its agent's summary; whether it is the first summary
        since the last batch (the writer then has something to write)."""
        summaries = self._summaries
        key = (process_key(record.agent), record.method, record.outcome)
        summary = summaries.get(key)
        if summary is None:
            # Of many names, not all of one server's (a held tool's record names its
            # server): the summary names none, so no search by server counts the others.
            summaries[key] = msgspec.structs.replace(
                record,
                count=1,
                last_ts=record.ts,
                args_digest=None,
                arguments=msgspec.UNSET,
                server=None,
                original=None,
            )
            return len(summaries) == 1
        summary.count = summary.calls + 1
        last = summary.last_ts
        if isinstance(last, UnsetType) or record.ts > last:
            summary.last_ts = record.ts
        summary.args_bytes += record.args_bytes
        summary.result_bytes += record.result_bytes
        return False

    def take(self) -> list[CallRecord]:
        """The summaries made since the last time, for the writer's batch; and the
        budgets that are whole again forgotten (a fresh one is the same)."""
        summaries = list(self._summaries.values())
        self._summaries.clear()
        now = self._clock()
        _forget_whole(self._budgets, now, BURST, RATE)
        _forget_whole(self._users, now, USER_BURST, USER_RATE)
        return summaries

    def warn(self, summaries: list[CallRecord]) -> None:
        """Say so in the log, at most every ``WARN_EVERY`` seconds, naming the agent
        of the largest of ``summaries``."""
        if not summaries or self._warning.admit() is None:
            return
        most = max(summaries, key=_calls)
        logger.warning(
            "%s: %d %s requests refused before reaching a server (the first: %s), past its "
            "budget of %d at once and %g a second: the audit log counts them in one record "
            "per write (mcpd calls --failed)",
            visible(most.agent.label()),
            most.calls,
            most.method,
            visible(most.name or "-"),
            BURST,
            RATE,
            extra=log_extra(None, "audit", "requests counted"),
        )


def _forget_whole(budgets: dict[_K, Bucket], now: float, burst: int, rate: float) -> None:
    """The ``budgets`` whole again let go: a fresh one is the same."""
    refilled = [key for key, b in budgets.items() if b.tokens + (now - b.stamp) * rate >= burst]
    for key in refilled:
        del budgets[key]


def _calls(record: CallRecord) -> int:
    return record.calls


def finish(summaries: list[CallRecord]) -> None:
    """Each summary's times as text, as its line is written (in the writer's thread)."""
    stamp(summaries)
    for summary in summaries:
        last = summary.last_ts
        if not isinstance(last, UnsetType):
            summary.last_time = iso(last)
