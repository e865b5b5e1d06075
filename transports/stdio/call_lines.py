"""The lines of a stdio server's calls, each put on its stdin once there is room.

A call is handed to the transport without waiting (the scheduler runs on callbacks),
so a server that stops reading would otherwise have every call sent meanwhile kept
whole in mcpd, whatever the writer's bound. A call's line is made only while less
than that bound waits for the server: until then the call keeps no more than what it
already holds (its arguments), and waits within its own time limit. A call given up
before any of its line is written is taken back whole, so the server never reads it;
one whose line the server has begun to read is written to the line's end, as half a
line would run into whatever came next.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable

from protocol.jsonrpc import messages as rpc
from protocol.lines.oneline import line_fault
from protocol.shown.logfields import log_extra

from ..linewriter import LineWriter

__all__ = ["CallLines", "checked_line"]

logger = logging.getLogger("mcpd.stdio")


class CallLines:
    def __init__(self, writer: LineWriter, fail: Callable[[rpc.Id, rpc.RPCError], None]) -> None:
        """``fail`` answers a call whose line, made later, could not be sent."""
        self._writer = writer
        self._fail = fail
        # Calls whose lines wait for room, in the order they came: how to make each.
        self._waiting: dict[rpc.Id, Callable[[], bytes]] = {}
        # Calls whose lines are queued and none of them written yet; an entry goes as
        # the writer lets go of the line (written, or begun) or the call takes it back.
        self._queued: dict[rpc.Id, weakref.ref[memoryview]] = {}

    @property
    def waiting(self) -> bool:
        """Whether calls wait for room: a new one waits behind them."""
        return bool(self._waiting)

    def wait(self, rid: rpc.Id, make: Callable[[], bytes]) -> None:
        """Queue the line ``make`` makes for call ``rid`` once there is room, after the
        calls waiting before it."""
        self._waiting[rid] = make
        # Told of room only while someone waits for it: a flush is on every call's way.
        self._writer.on_room = self.room
        self.room()

    def queue(self, rid: rpc.Id, line: bytes) -> None:
        """Queue call ``rid``'s line now; it may be taken back until any of it is written."""
        own = self._writer.put_own(line)
        if own is not None:
            queued = self._queued
            queued[rid] = weakref.ref(own, lambda _: queued.pop(rid, None))

    def take_back(self, rid: rpc.Id) -> bool:
        """Whether none of call ``rid``'s line was written; it is then never written."""
        if self._waiting.pop(rid, None) is not None:
            return True
        ref = self._queued.pop(rid, None)
        own = None if ref is None else ref()
        if own is None or not self._writer.withdraw(own):
            return False
        self.room()
        return True

    def room(self) -> None:
        """Queue the waiting lines that fit now."""
        waiting, writer = self._waiting, self._writer
        while waiting and writer.has_room:
            rid = next(iter(waiting))
            make = waiting.pop(rid)
            try:
                line = make()
            except rpc.RPCError as exc:
                self._fail(rid, exc)
            else:
                self.queue(rid, line)
        if not waiting:
            writer.on_room = None

    def clear(self) -> None:
        """Nothing more will be written: let the waiting calls' arguments go."""
        self._waiting.clear()


def checked_line(alias: str, line: bytes, what: str) -> bytes:
    """``line``, if it is one line of JSON; else rpc.RPCError."""
    fault = line_fault(line)
    if fault is None:
        return line
    # A bug in mcpd, not in the server: the child must never get a broken line.
    logger.error(
        "%s: did not send %s to the server: %s (a fault in mcpd)",
        alias,
        what,
        fault,
        extra=log_extra(alias, "broken_line", fault),
    )
    raise rpc.RPCError(rpc.INTERNAL_ERROR, f"mcpd could not send {what} to {alias}: {fault}")
