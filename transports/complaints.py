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

import logging
from collections.abc import Callable
from typing import Final, TypeAlias

import trio

from protocol.pacing.buckets import Throttle
from protocol.shown.logfields import log_extra

logger = logging.getLogger("mcpd.transport")

# Whether a warning may be logged now: None to stay quiet, else a note for its end.
Complain: TypeAlias = Callable[[], str | None]

BURST: Final = 20
EVERY: Final = 1.0  # seconds between warnings, once the burst is spent


class Complaints:
    """The budget for the warnings about one server."""

    __slots__ = ("_throttle",)

    def __init__(self) -> None:
        # Made anywhere (also before the event loop runs): the clock is read only
        # when a warning asks.
        self._throttle = Throttle(BURST, EVERY, trio.current_time)

    def admit(self) -> str | None:
        """None: stay quiet. Otherwise a note for the end of the warning."""
        held = self._throttle.admit()
        if held is None:
            return None
        return f" ({held} more like this not logged)" if held else ""


def said_too_large(label: str, reason: str, complain: Complain) -> None:
    """Say, within ``complain``'s budget, that a stream was cut at an event larger than
    mcpd keeps (``reason``): the server may send such events over and over."""
    note = complain()
    if note is not None:
        logger.warning("%s%s", reason, note, extra=log_extra(label, "event_too_large"))
