"""Per-rule rate limits (``rate = "30/min"``), counted for each agent apart.

A token bucket per (rule, agent): a rule's whole count at once, then refilled
evenly over its period. A call over the limit is refused with the time until the
agent may call again, as an open breaker says when it retries. Buckets that have
filled up again are forgotten once there are many, so agents that come and go leave
nothing behind.
"""

from __future__ import annotations

from typing import Final

from protocol.pacing.buckets import Bucket

from ...config.tables.policy import Rate
from .rules import Decision

# Past this many buckets, full ones are dropped before another is made.
PRUNE_AT: Final = 4096
# Buckets kept at most, full or not: past it, those of the agents known longest go.
# Each is a process or a connection, which had an allowance of its own anyway.
MAX_BUCKETS: Final = 65536
# The refill is float arithmetic on a clock far from zero: an agent calling again when
# it was told may be a rounding error short of a whole call, which is no reason to
# refuse it (and tell it to wait again for next to nothing).
SLACK: Final = 1e-6


class _Allowance:
    __slots__ = ("bucket", "per_second", "rate")

    def __init__(self, rate: Rate, now: float) -> None:
        self.rate = rate
        self.per_second = rate.calls / rate.period
        self.bucket = Bucket(tokens=float(rate.calls), stamp=now)

    def take(self, now: float) -> float | None:
        if self.bucket.take(now, self.rate.calls, self.per_second):
            return None
        wait = (1.0 - self.bucket.tokens) / self.per_second
        if wait > SLACK:
            return wait
        self.bucket.tokens -= 1.0
        return None

    def full(self, now: float) -> bool:
        b = self.bucket
        return b.tokens + (now - b.stamp) * self.per_second >= self.rate.calls


class RateLimits:
    def __init__(self) -> None:
        self._allowances: dict[tuple[int, str], _Allowance] = {}
        self._prune_at = PRUNE_AT

    def admit(self, decision: Decision, agent: str, now: float) -> float | None:
        """None when the call may go; else the seconds until this agent may call again
        under ``decision``'s rule. ``agent`` tells agents apart (``AgentInfo.key``)."""
        rate, rule = decision.rate, decision.rule
        if rate is None or rule is None:
            return None
        key = (rule, agent)
        allowance = self._allowances.get(key)
        if allowance is None or allowance.rate != rate:
            if len(self._allowances) >= self._prune_at:
                self._prune(now)
            allowance = self._allowances[key] = _Allowance(rate, now)
        return allowance.take(now)

    def _prune(self, now: float) -> None:
        kept = [(k, a) for k, a in self._allowances.items() if not a.full(now)]
        if len(kept) >= MAX_BUCKETS:
            kept = kept[len(kept) - MAX_BUCKETS // 2 :]
        self._allowances = dict(kept)
        # The next look once as many again are made: agents that all still count (a
        # rule of one call a day) cost one pass over them now and then, not one each.
        self._prune_at = max(PRUNE_AT, 2 * len(kept))

    def __len__(self) -> int:
        return len(self._allowances)
