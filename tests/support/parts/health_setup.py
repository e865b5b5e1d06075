"""A connected server's health watch on its own, against a server a test plays: what
each probe gets, and a breaker that one failure opens."""

from __future__ import annotations

import math

import trio

from mcpd.servers.circuit.breaker import Breaker, BreakerConfig
from mcpd.servers.connected.health import Doubt, Health
from mcpd.servers.connected.upstream import Upstream


class Never:
    """A probe answer that never comes."""


class Server:
    """What the probe gets: nothing to raise (an answer), an exception, or ``Never``."""

    def __init__(self) -> None:
        self.answer: Exception | Never | None = None
        self.probes = 0
        self.era = "modern"

    async def probe(self) -> None:
        self.probes += 1
        if isinstance(self.answer, Never):
            await trio.sleep_forever()
        if self.answer is not None:
            raise self.answer


def as_upstream(server: Server) -> Upstream:
    return server  # type: ignore[return-value]


class Setup:
    def __init__(self, *, interval: float = 0.0, probe_timeout: float = 3.0) -> None:
        self.breaker = Breaker(BreakerConfig(failure_threshold=1, cooldown_base=10.0))
        self.published = 0
        self.answered_at = -math.inf  # when the server last answered anything
        self.health = Health(
            "s",
            self.breaker,
            interval=lambda: interval,
            probe_timeout=lambda: probe_timeout,
            on_probe=self._publish,
            answered_at=lambda: self.answered_at,
            trouble_shown=lambda: 30.0,
        )
        self.server = Server()

    def _publish(self) -> None:
        self.published += 1

    async def tend(self) -> None:
        await self.health.tend(as_upstream(self.server), trio.current_time())

    def doubt(self, *, trial: bool = False) -> None:
        """A call admitted now runs out of time now (the trial if the circuit is half
        open)."""
        adm = self.breaker.allow(trio.current_time())
        assert adm.probe == trial
        self.health.doubt(Doubt(trio.current_time(), "no answer within 2 s", adm.ticket, trial))

    def open_breaker(self) -> None:
        """One failure opens it (threshold 1); its probe is due after the cooldown."""
        self.breaker.record_failure(trio.current_time(), "down")
        assert self.breaker.state == "open"
