"""What a stdio server says besides its messages: its stderr.

stderr is the server's own log. Lines that arrive together (a start-up banner, a
boxed traceback, a burst of warnings) become one log record, so the journal keeps
them together and its rate limit counts the burst once; a burst ends when stderr has
been quiet for ``BURST_GAP``, or it has ``BURST_LINES`` lines or ``RECORD_BYTES`` of
them. A record's size is bounded, so the log's budget of records a second per server
(``mcpd.local.service.ratelimit``) bounds the bytes a second a server can put in the log. The
last lines are kept as the tail that every failure of the server quotes.

Reading stderr costs the server's read budget as its stdout's lines that answer
nothing do (``transports.read_pace``), a blank line (not logged) as any other: a server
writing stderr without end is read more slowly, and shown held back, instead of taking
the loop every server shares. (Lines on stdout that are not JSON-RPC are warned about
under the server's ``Complaints``.)
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable
from typing import Final

import trio

from protocol.lines.framing import LineFramer, Oversized
from protocol.pacing.read_budget import cost, skipped
from protocol.shown.logfields import log_extra
from protocol.shown.visible import cut_bytes

from ...read_pace import Paced

logger = logging.getLogger("mcpd.stdio")

BURST_GAP: Final = 0.05
BURST_LINES: Final = 200
# A record holds lines up to this many of their bytes (a line longer than the rest
# alone): a traceback's worth, not a flood's.
RECORD_BYTES: Final = 4096
_STDERR_MAX_LINE: Final = 4096


class StderrLog:
    def __init__(self, alias: str, tail: int, on_line: Callable[[str], None] | None = None) -> None:
        """``on_line`` (for tests and embedders) takes each line instead of the log."""
        self.alias = alias
        self.tail: deque[str] = deque(maxlen=tail)
        self._on_line = on_line
        self._burst: list[str] = []
        self._burst_bytes = 0

    @property
    def pending(self) -> bool:
        """Lines are held for the burst's record (the reader should not wait forever)."""
        return bool(self._burst)

    def line(self, item: bytes | Oversized) -> None:
        if isinstance(item, Oversized):
            # Its start, with the note of the cut the secret guard looks for.
            text = cut_bytes(item.prefix, len(item.prefix), whole=item.limit)
            size = len(item.prefix)
        else:
            text = item.decode("utf-8", "replace").rstrip()
            size = len(item)
        self.tail.append(text)
        if self._on_line is not None:
            self._on_line(text)
            return
        if self._burst and self._burst_bytes + size > RECORD_BYTES:
            self.flush()
        self._burst.append(text)
        self._burst_bytes += size + 1
        if len(self._burst) >= BURST_LINES:
            self.flush()

    def flush(self) -> None:
        if self._burst:
            text, self._burst, self._burst_bytes = "\n".join(self._burst), [], 0
            logger.info("%s", text, extra=log_extra(self.alias, "stderr"))


async def read_stderr(stderr: trio.abc.ReceiveStream, log: StderrLog, paced: Paced) -> None:
    """Feed the server's stderr to ``log`` until it closes, at ``paced``'s pace; a broken
    pipe is its end too."""
    framer = LineFramer(_STDERR_MAX_LINE)
    try:
        while True:
            # While a burst is held, a quiet moment ends it, or a wait for the pace.
            with trio.move_on_after(BURST_GAP if log.pending else math.inf) as quiet:
                await paced.before_read()
                data = await stderr.receive_some(65536)
            if quiet.cancelled_caught:
                paced.read(0.0)  # nothing was read
                log.flush()
                continue
            if not data:
                break
            paced.came()
            units = 0.0
            for item in framer.feed(data):
                log.line(item)
                units += 1.0 if isinstance(item, Oversized) else cost(item)
            if framer.skipped:
                units += skipped(framer.take_skipped())
            if framer.blank:  # not logged, but read: a line each all the same
                lines, size = framer.take_blank()
                units += lines + skipped(size)
            paced.read(units)
            del data  # not kept while the server is quiet
        for item in framer.flush():
            log.line(item)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    finally:
        log.flush()
