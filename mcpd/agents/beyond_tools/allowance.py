"""What one agent may spend matching URIs against the servers' resource templates.

A read, a subscription or a completion names a URI that may have to be matched, and
one costly URI can take a route's whole budget. Each agent (a connection, an HTTP
session, or one user's stateless HTTP requests) has a share of steps per second; a
request that finds less than a route's budget left waits for the next second. Many
costly requests at once from one agent then make that agent wait, not the others.
"""

from __future__ import annotations

import math
from typing import Final

import trio

from ...registry.uris.claims import ROUTE_STEPS, Budget

AGENT_STEPS: Final = 2 * ROUTE_STEPS  # per agent per second
_SECOND: Final = 1.0


class Allowance:
    __slots__ = ("_left", "_renewed")

    def __init__(self) -> None:
        self._left = AGENT_STEPS
        self._renewed = -math.inf

    def _renew(self) -> None:
        now = trio.current_time()
        if now >= self._renewed + _SECOND:
            self._left, self._renewed = AGENT_STEPS, now

    async def take(self) -> Budget:
        """A route's budget, once the agent's share holds one; ``give_back`` it after."""
        self._renew()
        while self._left < ROUTE_STEPS:
            await trio.sleep_until(self._renewed + _SECOND)
            self._renew()
        return self._reserve(ROUTE_STEPS)

    def now(self) -> Budget:
        """What is left of the share now, up to a route's budget (for what cannot wait:
        the URIs a listen names); ``give_back`` it after."""
        self._renew()
        return self._reserve(min(ROUTE_STEPS, self._left))

    def _reserve(self, steps: int) -> Budget:
        self._left -= steps
        return Budget(steps)

    def give_back(self, budget: Budget) -> None:
        """What ``budget`` did not spend returns to the share."""
        self._left += budget.left
