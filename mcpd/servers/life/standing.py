"""One server's standing: its state and outage as its calls and ``mcpd status`` find
them, and what its calls tell of it (a failure to reach it, a call out of time, a
refused version). The part of a server's parts its call scheduler holds.

``server_parts.ServerParts`` builds it of the parts it already has and keeps its live
facts (the limits a reload sets, the kind of transport, the session in force, the
child's last stderr lines) up to date; the scheduler reads them as they are now.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from ...policy.redaction.guard import SecretGuard
from ...registry.tables.catalog import Catalog
from ..calling.calls import Call, CallLimits
from ..circuit.breaker import Breaker
from ..connected.health import Doubt, Health
from ..connected.upstream import Upstream
from ..lists.rediscovery import Rediscovery
from ..status.outage import Outage
from ..status.state import outage_of, server_state
from ..status.stats import LatencyStats
from .downtime import Downtime
from .lazy_state import LazyState


class Standing:
    """``wake``: tells the server's own task there is news to act on (a probe, a
    version to ask about); ``on_change``: tells the rest of mcpd its state moved."""

    def __init__(
        self,
        alias: str,
        *,
        guard: SecretGuard,
        breaker: Breaker,
        stats: LatencyStats,
        limits: CallLimits,
        transport_kind: str,
        downtime: Downtime,
        lazy: LazyState | None,
        health: Health,
        rediscovery: Rediscovery,
        registry: Catalog,
        wake: Callable[[], None],
        on_change: Callable[[str], None],
    ) -> None:
        self.alias = alias
        self.guard = guard
        self.breaker = breaker
        self.stats = stats
        self.downtime = downtime
        self.lazy = lazy
        self.health = health
        self._rediscovery = rediscovery
        self._registry = registry
        self._wake = wake
        self._on_change = on_change
        # -- live facts, kept up to date by the server's parts --
        self.limits = limits  # the config in force's
        self.transport_kind = transport_kind  # "stdio" or "http", as it is reached now
        self.upstream: Upstream | None = None  # the session in force
        self.stderr: list[str] = []  # a child's last lines
        # Set once its first start is over, however it went.
        self.first_attempt = trio.Event()

    # -- its state --

    @property
    def phase(self) -> str:
        return self.downtime.phase

    @property
    def state(self) -> str:
        if self.lazy is not None and self.lazy.stopping:
            return "idle"
        return server_state(self.downtime, self.breaker, trio.current_time())

    def outage(self) -> Outage:
        return outage_of(
            self.alias, self.state, self.breaker, self.downtime, trio.current_time(), self.stderr
        )

    @property
    def available(self) -> bool:
        """Whether calls can be expected to work (the tools are listed as available)."""
        if self.lazy is not None and self.lazy.listed_available(self.phase):
            return True
        return self.state in ("ready", "degraded")

    def publish(self) -> None:
        """Its state, shown in the registry's listing and told to the rest of mcpd."""
        if self.available:
            self._registry.set_availability(self.alias, True)
        else:
            self._registry.set_availability(self.alias, False, self.outage().marker())
        self._on_change(self.alias)

    def waits_for_start(self) -> bool:
        """Whether a call that finds the server down waits for it to come up: while
        its first start is under way; a lazy server's, while it is idle, being stopped
        (its phase still says connected until the stop is done) or started on demand."""
        if self.lazy is not None:
            return (self.phase != "connected" or self.lazy.stopping) and self.available
        return self.phase == "starting" and not self.first_attempt.is_set()

    def failed_call(self, reason: str, start: float, stderr: str | None) -> Outage:
        """What a call that could not reach the server is told: the server's state as
        that failure left it, and when mcpd tries it again."""
        state = self.state
        if state not in ("ready", "degraded"):
            down = self.outage()
            return Outage(self.alias, state, reason, down.since, down.retry_at, stderr)
        up = self.upstream
        if up is not None and up.transport.error is not None:
            # Its session ends with this failure (a process gone): the server is down,
            # as its runner is about to say, with when it tries again.
            return Outage(self.alias, "failed", reason, start, stderr=stderr)
        # Answering others; a failure not counted against it (its call began before
        # the breaker last moved) makes it no less this call's.
        return Outage(self.alias, "degraded", reason, start, stderr=stderr)

    # -- what its calls and requests tell of it --

    def availability_failure(
        self, elapsed: float, reason: str, ticket: int, wait: float | None = None
    ) -> None:
        """A call could not reach the server (``wait``: how long the server asked not
        to be called again, if it did)."""
        now = trio.current_time()
        self.stats.record(elapsed, error=True)
        before = self.breaker.state
        if wait is None:
            self.breaker.record_failure(now, reason, ticket)
        else:
            self.breaker.hold_open(now, now + wait, reason, ticket)
        # A wait may only have moved the retry time of a circuit open already.
        if self.breaker.state != before or wait is not None:
            self.publish()

    def told_to_wait(self, reason: str, wait: float) -> None:
        """A request other than a call, or a probe, was answered 429 or 503 with a
        Retry-After of ``wait`` seconds: its circuit opens until then, as a call's
        does."""
        now = trio.current_time()
        self.breaker.hold_open(now, now + wait, reason)
        self.publish()

    def timed_out(self, call: Call, elapsed: float, reason: str) -> None:
        """``call`` got no answer in time: an availability failure only if the server
        then answers nothing at all (``health``), not if it is slow for this call."""
        self.stats.record(elapsed, error=True)
        # One agent's slow tool must not close the server to every agent: whether
        # this counts against it waits for what it answers next.
        self.health.doubt(Doubt(trio.current_time(), reason, call.ticket, call.probe))
        # A trial's slot is the doubt's now, given back as it is settled.
        call.probe = False
        self._wake()

    def check_liveness(self) -> None:
        """A call failed in a way that may mean the server is gone: probe it soon."""
        self.health.suspect = True
        self._wake()

    def version_refused(self) -> None:
        """The server refused a request as made for a version it does not speak: it is
        asked which it speaks before anything else."""
        self._rediscovery.doubted = True
        self._wake()
