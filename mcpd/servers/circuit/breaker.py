"""Per-server circuit breaker: a pure state machine driven by a caller-supplied clock.

    closed    --failure_threshold consecutive failures-->  open
    open      --cooldown elapsed (seen by allow/poll)--->  half_open
    half_open --the one probe's call succeeds---------->  closed
    half_open --the one probe is answered otherwise---->  closed on trial
    half_open --the one probe fails-------------------->  open, with a longer cooldown
    closed on trial --a call succeeds------------------>  closed
    closed on trial --a call fails--------------------->  open, with a longer cooldown

Only availability failures should be reported (server down, timeout, stream cut); a
JSON-RPC error is a working server saying no, and counts as a success here. A call that
ran out of time at a server that answers is no failure here, but it is trouble: kept
with the failures (``BreakerStatus.trouble``) until a call succeeds.

Calls (``tools/call``) decide: an answer to an agent's other requests (``prompts/get``,
``resources/read``, ...), a result or an error, is not reported, so it ends no trial and
clears no count; one that fails to reach the server has it probed (the probe's outcome
is reported), and a Retry-After holds the circuit open as a call's does.

A server that answers without a call going through (mcpd's own probe answered, a call
that ran out of time followed by an answer) is there, but that says nothing of its
calls: the circuit closes on trial, so calls go again, yet the cooldown keeps growing
and the outage keeps its start until one call succeeds; the first that fails opens it
again at once. A server whose lists work and whose calls all fail is then tried less
and less often (``cooldown``), never as if it had recovered.

A connection made again (a process started anew, an HTTP session opened again) is such
an answer only where the circuit opened because mcpd could not reach the server at all
(``record_failure(unreached=True)``: its probe could not connect): the new connection
shows it is there again. A circuit opened otherwise (calls that failed, a probe the
server failed by exiting, by cutting its connection, or by saying nothing in time) stays
open across a connection made again until its cooldown ends, however often the server's
process dies or its session ends: the probe at the cooldown's end decides.

Every admission carries a ticket, the breaker's epoch when it was issued. The epoch
moves on every change of state and every new probe, so a report from a call that started
before the breaker opened, or from a probe that already expired, cannot change the state
later: it only shows in the totals.

A failure's reason is kept as ``kept_reason`` makes it: its owner passes what masks the
secrets mcpd holds in the server's words it quotes, so every failure reported (a call's,
a probe's) is kept masked for whoever reads it later (a refused call, ``mcpd status``,
the journal)."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from .circuit_states import Admission, BreakerStatus, State, Transition
from .cooldown import Cooldown


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


class Breaker:
    __slots__ = (
        "_admit",
        "_consecutive",
        "_cooldown",
        "_epoch",
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
        "_trial_since",
        "_trouble",
        "_trouble_at",
        "_unreached",
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
        self._total_failures = 0
        self._times_opened = 0
        self._reason: str | None = None
        self._since: float | None = None
        self._retry_at = 0.0
        self._cooldown = _cooldown_of(self.config)
        self._probe_out = False
        self._trial_since: float | None = None
        self._trouble: str | None = None
        self._trouble_at: float | None = None
        # The open circuit's last failure was mcpd failing to connect to the server.
        self._unreached = False
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

    def allow(self, now: float, expires_in: float | None = None) -> Admission:
        """``expires_in``: how long a probe admitted now may hold its slot, if less
        than ``probe_timeout`` (what calls refused meanwhile are told to wait)."""
        if self._state == "closed":
            return self._admit
        if self.poll(now) == "open" or (self._probe_out and now < self._retry_at):
            return self._refusal
        # A new probe; an expired one's late report now carries a stale ticket.
        self._epoch += 1
        self._probe_out = True
        hold = self.config.probe_timeout
        self._retry_at = now + (hold if expires_in is None else min(hold, expires_in))
        self._refusal = self._refused()
        return Admission(
            True, "half_open", self._epoch, True, self._reason, self._since, self._retry_at
        )

    def record_success(self, now: float, ticket: int | None = None) -> None:
        """Report a call that reached a working server. ``ticket=None`` means current."""
        if ticket is not None and ticket != self._epoch:
            return
        if self._state == "closed":
            troubled = self._trouble_at is not None
            self._consecutive = 0
            self._trouble = self._trouble_at = None
            if self._trial_since is not None:
                self._recovered()
                if self._on_transition is not None:
                    self._on_transition(Transition("closed", "closed", now, None, None))
            elif troubled and self._on_transition is not None:
                self._on_transition(Transition("closed", "closed", now, None, None, settled=True))
        elif self._state == "half_open" and self._probe_out:
            self._consecutive = 0
            self._trouble = self._trouble_at = None
            self._probe_out = False
            self._recovered()
            self._move("closed", now, None)

    def record_heard(self, now: float, ticket: int | None = None) -> None:
        """Report that the server answered, with no call going through: mcpd's probe
        answered, a connection and its lists made again, a call that ran out of time
        followed by an answer. A half-open circuit closes on trial; an open one only
        for a report of now (``ticket=None``) where it opened as mcpd could not reach
        the server (see the module's docstring); a closed one keeps its count of
        failures."""
        if ticket is not None and ticket != self._epoch:
            return
        if self._state == "half_open" and (self._probe_out or ticket is None):
            self._probe_out = False
        elif not (self._state == "open" and ticket is None and self._unreached):
            return
        self._trial_since = now
        self._move("closed", now, None, trial=True)

    def record_timeout(self, now: float, reason: str) -> None:
        """A call ran out of time at a server that answered after it: no failure, but
        trouble shown until a call succeeds."""
        self._trouble = self._kept_reason(reason)
        self._trouble_at = now

    def record_failure(
        self, now: float, reason: str, ticket: int | None = None, *, unreached: bool = False
    ) -> None:
        """Report an availability failure. ``ticket=None`` means current.
        ``unreached``: no connection to the server could be made at all, as opposed to
        a server that failed what it was asked (its process exited, its connection was
        cut, it said nothing in time)."""
        self._total_failures += 1
        if ticket is not None and ticket != self._epoch:
            return
        if self._state == "closed":
            kept = self._failed(now, reason)
            # On trial, the first call that fails is the one that decides.
            on_trial = self._trial_since is not None
            if on_trial or self._consecutive >= self.config.failure_threshold:
                self._trial_since = None
                self._open(now, kept, unreached=unreached)
        elif self._state == "half_open" and self._probe_out:
            kept = self._failed(now, reason)
            self._probe_out = False
            self._open(now, kept, unreached=unreached)

    def hold_open(self, now: float, until: float, reason: str, ticket: int | None = None) -> None:
        """Report an availability failure whose server said when to come back (a 429 or
        503 with Retry-After): the circuit opens, however few failures came before, and
        no probe goes before ``until``. An open circuit is only kept open longer: the
        server's word is about now, whenever the call that met it began; its answer is
        then the reason the circuit is open, reported as a move from open to open."""
        self._total_failures += 1
        if self._state == "open":
            self._unreached = False  # it answered
            if until > self._retry_at:
                self._retry_at = until
                kept = self._failed(now, reason)
                self._refusal = self._refused()
                if self._on_transition is not None:
                    self._on_transition(Transition("open", "open", now, kept, until))
            return
        stale = ticket is not None and ticket != self._epoch
        if stale or (self._state == "half_open" and not self._probe_out):
            return
        kept = self._failed(now, reason)
        self._trial_since = None
        self._probe_out = False
        self._open(now, kept, until)

    def reset(self, now: float) -> bool:
        """A person's word (``mcpd reset``): a circuit that is not closed closes on
        trial, whatever holds it (a cooldown, a server's Retry-After), so the next call
        decides; the outage and the cooldown's growth are kept until one succeeds.
        Whether it was not closed."""
        if self._state == "closed":
            return False
        self._probe_out = False
        self._trial_since = now
        self._move("closed", now, None, trial=True, asked=True)
        return True

    def reconfigure(self, config: BreakerConfig) -> None:
        """Take new thresholds and cooldowns, keeping the state and the counts: the next
        threshold reached or cooldown begun is the new config's, grown as far from the new
        base as the old one had grown from the old; a cooldown under way keeps its end."""
        self.config = config
        self._cooldown = self._cooldown.retuned(
            config.cooldown_base, config.cooldown_factor, config.cooldown_cap
        )

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
            trouble=self._trouble,
            trouble_at=self._trouble_at,
            trial_since=self._trial_since if self._state == "closed" else None,
        )

    def _failed(self, now: float, reason: str) -> str:
        """Count a failure; returns its reason as kept."""
        self._consecutive += 1
        self._trouble_at = now
        kept = self._reason = self._trouble = self._kept_reason(reason)
        return kept

    def _recovered(self) -> None:
        """A call succeeded: the outage is over, and the next starts from the base."""
        self._cooldown.restart()
        self._since = self._trial_since = None

    def _open(
        self, now: float, reason: str, until: float = 0.0, *, unreached: bool = False
    ) -> None:
        self._unreached = unreached
        if self._since is None:
            self._since = now
        self._times_opened += 1
        self._retry_at = max(now + self._cooldown.take(), until)
        self._move("open", now, reason)

    def _move(
        self,
        new: State,
        now: float,
        reason: str | None,
        *,
        trial: bool = False,
        asked: bool = False,
    ) -> None:
        old = self._state
        self._state = new
        self._epoch += 1
        if new == "closed":
            self._admit = Admission(True, "closed", self._epoch)
        else:
            self._refusal = self._refused()
        if self._on_transition is not None:
            retry_at = self._retry_at if new == "open" else None
            self._on_transition(Transition(old, new, now, reason, retry_at, trial, asked=asked))

    def _pending_retry(self) -> float | None:
        # Half-open without a probe out has no wait: the next caller becomes the probe.
        return self._retry_at if self._state == "open" or self._probe_out else None

    def _refused(self) -> Admission:
        return Admission(
            False, self._state, self._epoch, False, self._reason, self._since, self._pending_retry()
        )


def _cooldown_of(config: BreakerConfig) -> Cooldown:
    return Cooldown(config.cooldown_base, config.cooldown_factor, config.cooldown_cap)
