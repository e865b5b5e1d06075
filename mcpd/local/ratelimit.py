"""Rate limiting of what others can make mcpd log, before it reaches the log.

A server that logs without pause must not fill the journal (or mcpd's own stderr)
for everyone: records that carry a server's stderr are admitted from a token bucket
per server, and what was held back is summed up in one record once the server's
bucket has room again. Every other record (outages, mcpd's own) passes the handler
untouched. What others can cause at will and often (a server's log messages, the
warnings a peer triggers by connecting) is limited where it is logged, by a
``Throttle`` each, before any record is made: a record only for the handler to drop
costs as much as one it writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from .journalfields import extra

# What a server says: its stderr, and its log messages (notifications/message).
_LIMITED = frozenset({"stderr", "message"})
# Under a flood, one summary of what was held back this often at most: one before
# each admitted record made the summaries a second flood.
SUMMARY_EVERY = 10.0


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


class StderrRateLimiter:
    """A token bucket per server for the records of what it says (``_LIMITED``).

    A chatty (or crash-looping) server must not flood the journal or drown other
    servers' lines. Lines over the budget are counted; when the server's lines are
    admitted again, one summary record ("N lines of output from X suppressed") goes first.
    All other records pass untouched.
    """

    def __init__(
        self, burst: int = 50, rate: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.burst = burst
        self.rate = rate
        self.clock = clock
        self._buckets: dict[str, Bucket] = {}

    def admit(self, record: logging.LogRecord) -> list[logging.LogRecord]:
        # A count of what was held back before a record was made (``Throttle``) is
        # already one of a few: holding it back would lose the count.
        if extra(record, "mcpd_event") not in _LIMITED or extra(record, "mcpd_suppressed"):
            return [record]
        server = str(extra(record, "mcpd_server") or "?")
        now = self.clock()
        bucket = self._buckets.get(server)
        if bucket is None:
            bucket = self._buckets[server] = Bucket(tokens=float(self.burst), stamp=now)
        if not bucket.take(now, self.burst, self.rate):
            bucket.lines += record.getMessage().count("\n") + 1
            return []
        if bucket.suppressed and now - bucket.summarized >= SUMMARY_EVERY:
            summary = self._summary(server, bucket, record.name)
            bucket.summarized = now
            return [summary, record]
        return [record]

    def pending_summaries(self) -> list[logging.LogRecord]:
        """Summaries for lines still suppressed (on shutdown nothing else would say so)."""
        out = []
        for server, bucket in self._buckets.items():
            if bucket.suppressed:
                out.append(self._summary(server, bucket, "mcpd"))
        return out

    @staticmethod
    def _summary(server: str, bucket: Bucket, logger_name: str) -> logging.LogRecord:
        count = bucket.lines
        bucket.suppressed = bucket.lines = 0
        return logging.makeLogRecord(
            {
                "name": logger_name,
                "levelno": logging.WARNING,
                "levelname": "WARNING",
                "msg": "%d lines of output from %s suppressed",
                "args": (count, server),
                "mcpd_server": server,
                "mcpd_event": "stderr",
                "mcpd_suppressed": count,
            }
        )


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
