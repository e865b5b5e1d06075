"""When a file mcpd keeps its state in is written again: soon after a change, and,
while changes keep coming, no more often than the file's size allows.

``registry.json`` and ``pins.json`` hold what the servers list, and each write of
them is a whole new file. A server that lists something new every moment, within its
limits, would have both written again after each list, as fast as the disk takes
them, and every write costs the event loop time that other agents wait for. So a
write waits a moment after a change (a burst of changes is one write), and the next
one waits at least ``SPACING`` after the last, longer after a large file (a second
for each ``RATE`` bytes it wrote): what changes in between is written together, and
the latest state is always written last. A write that failed is tried again as
late. When mcpd stops, what is not written yet is written.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Final

import trio

DEBOUNCE: Final = 0.5  # seconds after a change: one write for a burst of them
SPACING: Final = 5.0  # seconds between writes, at the least
RATE: Final = 4 * 1024 * 1024  # bytes a second a file is written at, on average, at most
_STOP_GRACE: Final = 5.0


class PacedWrites:
    """The writes of one file. Its writer calls ``begin`` as a write takes the state,
    then ``done`` (with the bytes it wrote) or ``failed``."""

    __slots__ = ("_next", "_pending", "_wake")

    def __init__(self) -> None:
        self._pending = False  # a change not taken by a write yet
        self._wake = trio.Event()  # set by a change (``run`` alone makes a new one)
        self._next = -math.inf  # no write before this time

    def changed(self) -> None:
        self._pending = True
        self._wake.set()

    def begin(self) -> None:
        """A write takes the state as it is now: a change from here on is the next
        write's."""
        self._pending = False

    def done(self, size: int) -> None:
        self._next = trio.current_time() + max(SPACING, size / RATE)

    def failed(self) -> None:
        """Nothing was written: the state is written again, once the spacing is over."""
        self._next = trio.current_time() + SPACING
        self.changed()

    async def run(
        self,
        write: Callable[[], Awaitable[object]],
        started: trio.Event | None = None,
        final: bool = False,
    ) -> None:
        """Write after each change, paced; not before ``started`` is set, if given.
        When cancelled, write once more what is not written yet (``final``: in any
        case, for a file that says when it was written)."""
        try:
            if started is not None:
                await started.wait()
            while True:
                while not self._pending:
                    self._wake = trio.Event()
                    await self._wake.wait()
                await trio.sleep(DEBOUNCE)
                await trio.sleep_until(self._next)
                if self._pending:  # else a write asked for at once took it
                    await write()
        finally:
            if self._pending or final:
                with trio.move_on_after(_STOP_GRACE, shield=True):
                    await write()
