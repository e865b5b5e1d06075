"""Rate limiting of what others can make mcpd log, before it reaches the log.

A server that logs without pause must not fill the journal (or mcpd's own stderr)
for everyone: records that carry a server's stderr or its log messages are admitted
from one token bucket per server, and what was held back is summed up, a record for
each kind, once the server's bucket has room again. Every other record (outages,
mcpd's own) passes the handler untouched. What others can cause at will and often
(a server's log messages, the warnings a peer triggers by connecting) is limited
where it is logged, by a ``protocol.pacing.buckets.Throttle`` each, before any record is
made: a record only for the handler to drop costs as much as one it writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from protocol.pacing.buckets import Bucket

from .journalfields import extra

# What a server says: its stderr, and its log messages (notifications/message), with
# the words for what was held back of each (an HTTP server has no stderr).
_LIMITED = {
    "stderr": "%d lines of output from %s suppressed",
    "message": "%d log messages from %s suppressed",
}
# Under a flood, one summary of what was held back this often at most: one before
# each admitted record would make the summaries a second flood.
SUMMARY_EVERY = 10.0


class StderrRateLimiter:
    """A token bucket per server for the records of what it says (``_LIMITED``).

    A chatty (or crash-looping) server must not flood the journal or drown other
    servers' lines. What is over the budget is counted by kind; when the server's
    records are admitted again, a summary of each kind held back goes first ("N lines
    of output from X suppressed", "N log messages from X suppressed").
    All other records pass untouched.
    """

    def __init__(
        self, burst: int = 50, rate: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.burst = burst
        self.rate = rate
        self.clock = clock
        self._buckets: dict[str, Bucket] = {}
        # How much of each kind a server's bucket held back since its last summary: a
        # log message counts once, a record of stderr as the lines it holds.
        self._held: dict[tuple[str, str], int] = {}

    def admit(self, record: logging.LogRecord) -> list[logging.LogRecord]:
        # A count of what was held back before a record was made (``Throttle``) is
        # already one of a few: holding it back would lose the count.
        kind = str(extra(record, "mcpd_event"))
        if kind not in _LIMITED or extra(record, "mcpd_suppressed"):
            return [record]
        server = str(extra(record, "mcpd_server") or "?")
        now = self.clock()
        bucket = self._buckets.get(server)
        if bucket is None:
            bucket = self._buckets[server] = Bucket(tokens=float(self.burst), stamp=now)
        if not bucket.take(now, self.burst, self.rate):
            lines = record.getMessage().count("\n") + 1 if kind == "stderr" else 1
            self._held[server, kind] = self._held.get((server, kind), 0) + lines
            return []
        if bucket.suppressed and now - bucket.summarized >= SUMMARY_EVERY:
            summaries = self._summaries(server, bucket, record.name)
            bucket.summarized = now
            return [*summaries, record]
        return [record]

    def pending_summaries(self) -> list[logging.LogRecord]:
        """Summaries for lines still suppressed (on shutdown nothing else would say so)."""
        out = []
        for server, bucket in self._buckets.items():
            if bucket.suppressed:
                out += self._summaries(server, bucket, "mcpd")
        return out

    def _summaries(self, server: str, bucket: Bucket, logger_name: str) -> list[logging.LogRecord]:
        bucket.suppressed = 0
        out = []
        for kind in _LIMITED:
            count = self._held.pop((server, kind), 0)
            if count:
                out.append(self._summary(server, kind, count, logger_name))
        return out

    @staticmethod
    def _summary(server: str, kind: str, count: int, logger_name: str) -> logging.LogRecord:
        return logging.makeLogRecord(
            {
                "name": logger_name,
                "levelno": logging.WARNING,
                "levelname": "WARNING",
                "msg": _LIMITED[kind],
                "args": (count, server),
                "mcpd_server": server,
                "mcpd_event": kind,
                "mcpd_suppressed": count,
            }
        )
