"""Per-server circuit breaker: a pure state machine driven by a caller-supplied clock.

    closed    --failure_threshold consecutive failures-->  open
    open      --cooldown elapsed (seen by allow/poll)--->  half_open
    half_open --the one probe succeeds----------------->  closed
    half_open --the one probe fails-------------------->  open, with a longer cooldown

Only availability failures should be reported (server down, timeout, stream cut); a
JSON-RPC error is a working server saying no, and counts as a success here.

Every admission carries a ticket, the breaker's epoch when it was issued. The epoch moves
on every transition and every new probe, so a report from a call that started before the
breaker opened, or from a probe that already expired, cannot change the state later: it
only shows in the totals.

A failure's reason is kept as ``kept_reason`` makes it: its owner passes what masks
the secrets mcpd holds in the server's words it quotes, so every failure reported (a
call's, a probe's) is kept masked for whoever reads it later (a refused call, ``mcpd
status``, the journal).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeAlias

import msgspec

State: TypeAlias = Literal["closed", "open", "half_open"]


class BreakerConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    failure_threshold: int = 5
    cooldown_base: float = 5.0
    cooldown_factor: float = 2.0
    cooldown_cap: float = 300.0
    # A probe whose caller vanished without reporting (cancelled) frees its slot after this.
    probe_timeout: float = 60.0

    def __post_init__(self) -> None:
        if self.failure_threshold < 1:
            raise ValueError("failure_threshold must be at least 1")
        if self.cooldown_base <= 0:
            raise ValueError("cooldown_base must be positive")
        if self.cooldown_factor < 1:
            raise ValueError("cooldown_factor must be at least 1")
        if self.cooldown_cap < self.cooldown_base:
            raise ValueError("cooldown_cap must not be below cooldown_base")
        if self.probe_timeout <= 0:
            raise ValueError("probe_timeout must be positive")


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


class BreakerStatus(msgspec.Struct, frozen=True):
    state: State
    consecutive_failures: int
    total_failures: int
    times_opened: int
    reason: str | None
    since: float | None
    retry_at: float | None
    failed_at: float | None = None  # the last failure counted


class Breaker:
    __slots__ = (
        "_admit",
        "_consecutive",
        "_cooldown",
        "_epoch",
        "_failed_at",
        "_kept_reason",
        "_on_transition",
        "_probe_out",
        "_reason",
        "_refusal",
        "_retry_at",
        "_since",
        "_state",
        "_times_opened",
        "_total_failures",
        "config",
    )

    def __init__(
        self,
        config: BreakerConfig | None = None,
        *,
        on_transition: Callable[[Transition], None] | None = None,
        kept_reason: Callable[[str], str] = str,
    ) -> None:
        self.config = config if config is not None else BreakerConfig()
        self._on_transition = on_transition
        self._kept_reason = kept_reason
        self._state: State = "closed"
        self._epoch = 0
        self._consecutive = 0
        self._failed_at: float | None = None
        self._total_failures = 0
        self._times_opened = 0
        self._reason: str | None = None
        self._since: float | None = None
        self._retry_at = 0.0
        self._cooldown = self.config.cooldown_base
        self._probe_out = False
        # allow() sits on every call's path: answers are prebuilt when the state changes.
        self._admit = Admission(True, "closed", 0)
        self._refusal = self._admit

    @property
    def state(self) -> State:
        return self._state

    @property
    def ticket(self) -> int:
        """What a report of something begun now carries, without being admitted as a
        call is (no probe is taken)."""
        return self._epoch

    def allow(self, now: float) -> Admission:
        if self._state == "closed":
            return self._admit
        if self.poll(now) == "open" or (self._probe_out and now < self._retry_at):
            return self._refusal
        # A new probe; an expired one's late report now carries a stale ticket.
        self._epoch += 1
        self._probe_out = True
        self._retry_at = now + self.config.probe_timeout
        self._refusal = self._refused()
        return Admission(
            True, "half_open", self._epoch, True, self._reason, self._since, self._retry_at
        )

    def record_success(self, now: float, ticket: int | None = None) -> None:
        """Report a call that reached a working server. ``ticket=None`` means current."""
        if ticket is not None and ticket != self._epoch:
            return
        if self._state == "closed":
            self._consecutive = 0
        elif self._state == "half_open" and self._probe_out:
            self._consecutive = 0
            self._probe_out = False
            self._cooldown = self.config.cooldown_base
            self._since = None
            self._move("closed", now, None)

    def record_failure(self, now: float, reason: str, ticket: int | None = None) -> None:
        """Report an availability failure. ``ticket=None`` means current."""
        self._total_failures += 1
        if ticket is not None and ticket != self._epoch:
            return
        if self._state == "closed":
            self._consecutive += 1
            self._failed_at = now
            self._reason = self._kept_reason(reason)
            if self._consecutive >= self.config.failure_threshold:
                self._open(now, self._reason)
        elif self._state == "half_open" and self._probe_out:
            self._consecutive += 1
            self._failed_at = now
            self._reason = self._kept_reason(reason)
            self._probe_out = False
            self._open(now, self._reason)

    def release_probe(self, ticket: int) -> bool:
        """Give back a probe whose call ended without an outcome (e.g. cancelled).

        Safe to call unconditionally in a ``finally``: it does nothing unless ``ticket``
        is the probe still out. Returns whether a probe was released.
        """
        if self._state != "half_open" or not self._probe_out or ticket != self._epoch:
            return False
        self._probe_out = False
        self._epoch += 1
        self._refusal = self._refused()
        return True

    def poll(self, now: float) -> State:
        """Apply the time-driven move (open -> half_open) if it is due."""
        if self._state == "open" and now >= self._retry_at:
            self._move("half_open", now, None)
        return self._state

    def status(self, now: float) -> BreakerStatus:
        """Counters for ``mcpd status``; applies a due open -> half_open move first."""
        self.poll(now)
        return BreakerStatus(
            state=self._state,
            consecutive_failures=self._consecutive,
            total_failures=self._total_failures,
            times_opened=self._times_opened,
            reason=self._reason,
            since=self._since,
            retry_at=self._pending_retry(),
            failed_at=self._failed_at,
        )

    def _open(self, now: float, reason: str) -> None:
        if self._since is None:
            self._since = now
        self._times_opened += 1
        self._retry_at = now + self._cooldown
        # Multiplying a stored value rather than raising to a power cannot overflow.
        self._cooldown = min(self.config.cooldown_cap, self._cooldown * self.config.cooldown_factor)
        self._move("open", now, reason)

    def _move(self, new: State, now: float, reason: str | None) -> None:
        old = self._state
        self._state = new
        self._epoch += 1
        if new == "closed":
            self._admit = Admission(True, "closed", self._epoch)
        else:
            self._refusal = self._refused()
        if self._on_transition is not None:
            retry_at = self._retry_at if new == "open" else None
            self._on_transition(Transition(old, new, now, reason, retry_at))

    def _pending_retry(self) -> float | None:
        # Half-open without a probe out has no wait: the next caller becomes the probe.
        return self._retry_at if self._state == "open" or self._probe_out else None

    def _refused(self) -> Admission:
        return Admission(
            False, self._state, self._epoch, False, self._reason, self._since, self._pending_retry()
        )
