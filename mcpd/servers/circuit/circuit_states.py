"""A circuit's states, and what its breaker (``breaker``) says of them: the answer to a
call asking to go (``Admission``), a change of state as it is journaled and shown
(``Transition``), and the counters ``mcpd status`` shows (``BreakerStatus``)."""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

State: TypeAlias = Literal["closed", "open", "half_open"]


class Admission(msgspec.Struct, frozen=True):
    """The answer to ``allow()``; a refusal has what an error message needs."""

    allowed: bool
    state: State
    ticket: int
    # True for the single call admitted in half_open; its outcome decides the state.
    probe: bool = False
    reason: str | None = None
    # When the current outage began (the first open since the breaker was last closed).
    since: float | None = None
    # Open: when the cooldown ends. Half-open with a probe out: when that probe expires.
    retry_at: float | None = None


class Transition(msgspec.Struct, frozen=True):
    old: State
    new: State
    at: float
    reason: str | None
    retry_at: float | None
    # Closed on trial: the server answered, but no call has succeeded yet. A move from
    # closed to closed is the end of a trial: a call succeeded. One from open to open
    # is a wait the server asked for, past the cooldown's end (``hold_open``).
    trial: bool = False
    # A call succeeded after trouble the circuit did not open for: only the state shown
    # (degraded, then ready) changes.
    settled: bool = False
    asked: bool = False  # closed on trial by ``reset``, not by the server's answer


class BreakerStatus(msgspec.Struct, frozen=True):
    state: State
    consecutive_failures: int
    total_failures: int
    times_opened: int
    reason: str | None
    since: float | None
    retry_at: float | None
    # The last failure or call out of time since a call last succeeded, and when.
    trouble: str | None = None
    trouble_at: float | None = None
    # Closed on trial (no call succeeded since it was open): since when.
    trial_since: float | None = None
