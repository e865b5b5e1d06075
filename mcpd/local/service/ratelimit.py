"""Rate limiting of what others can make mcpd log, before it reaches the log.

A server that logs without pause must not fill the journal (or mcpd's own stderr)
for everyone: records that carry a server's stderr are admitted from a token bucket
per server, and what was held back is summed up in one record once the server's
bucket has room again. Every other record (outages, mcpd's own) passes the handler
untouched. What others can cause at will and often (a server's log messages, the
warnings a peer triggers by connecting) is limited where it is logged, by a
``protocol.budget.Throttle`` each, before any record is made: a record only for the handler to drop
costs as much as one it writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from protocol.budget import Bucket

from .journalfields import extra

# What a server says: its stderr, and its log messages (notifications/message).
_LIMITED = frozenset({"stderr", "message"})
# Under a flood, one summary of what was held back this often at most: one before
# each admitted record would make the summaries a second flood.
SUMMARY_EVERY = 10.0


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
