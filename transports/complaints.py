"""The budget for warnings about what one server sends.

A server can send a message mcpd has to warn about (a response to no request, an
event that is not JSON-RPC, a line of junk on stdout) as fast as its connection
carries them. A warning for each would turn mcpd's event loop into a log writer
while every other server and agent waited, and fill the log for everyone. So each
transport keeps one ``Complaints`` for its server, and every such warning asks it
first, before anything of the warning is made: a burst, then one a second. The ones
held back are counted, and the next warning let through says how many they were.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final, TypeAlias

import trio

# Whether a warning may be logged now: None to stay quiet, else a note for its end.
Complain: TypeAlias = Callable[[], str | None]

BURST: Final = 20
RATE: Final = 1.0  # a second, once the burst is spent


class Complaints:
    """A token bucket for the warnings about one server."""

    __slots__ = ("_stamp", "_tokens", "suppressed")

    def __init__(self) -> None:
        self._tokens = float(BURST)
        # Made anywhere (also before the event loop runs): the first warning finds a
        # full bucket whatever the clock says then.
        self._stamp = -math.inf
        self.suppressed = 0

    def admit(self) -> str | None:
        """None: stay quiet. Otherwise a note for the end of the warning."""
        now = trio.current_time()
        self._tokens = min(float(BURST), self._tokens + (now - self._stamp) * RATE)
        self._stamp = now
        if self._tokens < 1:
            self.suppressed += 1
            return None
        self._tokens -= 1
        note = f" ({self.suppressed} more like this not logged)" if self.suppressed else ""
        self.suppressed = 0
        return note
