"""Token buckets: how much of something may happen now, and how much was held back.

Sans-IO: the time is given (``Bucket``) or read from a clock passed in (``Throttle``),
so the same budget serves the event loop (``trio.current_time``), a worker thread
(``time.monotonic``) and a test's own clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Bucket:
    """One source's budget: ``burst`` at once, then ``rate`` a second."""

    tokens: float
    stamp: float
    suppressed: int = 0
    lines: int = 0  # in the records suppressed (a record holds a burst of lines)
    summarized: float = -1e18

    def take(self, now: float, burst: int, rate: float) -> bool:
        """Whether one more may go now; what may not is counted in ``suppressed``."""
        self.tokens = min(float(burst), self.tokens + (now - self.stamp) * rate)
        self.stamp = now
        if self.tokens < 1.0:
            self.suppressed += 1
            return False
        self.tokens -= 1.0
        return True

    def take_some(self, now: float, burst: int, rate: float, wanted: int) -> int:
        """How many of ``wanted`` may go now (the first of them); the rest are counted
        in ``suppressed``."""
        self.tokens = min(float(burst), self.tokens + (now - self.stamp) * rate)
        self.stamp = now
        taken = min(wanted, int(self.tokens))
        self.tokens -= taken
        self.suppressed += wanted - taken
        return taken

    def spend(self, now: float, burst: int, rate: float, cost: float) -> float:
        """Take ``cost`` whatever is left, running into debt past it (a negative cost
        gives back, up to ``burst``); the seconds until the debt is paid."""
        self.tokens = min(float(burst), self.tokens + (now - self.stamp) * rate - cost)
        self.stamp = now
        return -self.tokens / rate if self.tokens < 0 else 0.0


class Throttle:
    """One warning that others can cause at will (a refused connection): ``burst`` at
    once, then one every ``every`` seconds. The ones held back are counted, and the next
    one let through says how many they were.

    With ``tell_every`` the count is told at most that often (the ones let through
    meanwhile are told 0): a throttle that lets many through a second would otherwise
    have a count said with each of them.
    """

    def __init__(
        self,
        burst: int = 5,
        every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        *,
        tell_every: float = 0.0,
    ) -> None:
        self.burst = burst
        self.rate = 1.0 / every
        self.clock = clock
        self.tell_every = tell_every
        # Full from the start, whenever that is: the clock is not read until it is used
        # (trio's only runs inside the event loop).
        self._bucket = Bucket(tokens=float(burst), stamp=-1e18)

    def admit(self) -> int | None:
        """None: hold this one back; otherwise how many were held back before it."""
        now = self.clock()
        bucket = self._bucket
        if not bucket.take(now, self.burst, self.rate):
            return None
        if not bucket.suppressed or now - bucket.summarized < self.tell_every:
            return 0
        held, bucket.suppressed = bucket.suppressed, 0
        bucket.summarized = now
        return held
