"""Reading one agent's socket: each chunk as it comes, framed into lines handed on one
by one, the writes a chunk causes batched together, and nothing more read while the
agent leaves its replies unread. What it holds of a line not yet ended is weighed
against what all connections may hold, and timed (``entry.unfinished``); one let go
to make room for another line ends its reading at once."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

import trio

from protocol.jsonrpc import messages as rpc
from protocol.lines.framing import LineFramer, Oversized

from ..daemon_seam import Lines, LineSink
from ..entry.unfinished import LineHold

_READ_SIZE: Final = 65536


class Unfinished:
    """Why a connection was let go in the middle of a line: it did not fit in what
    unfinished lines may hold, or it was not ended in time."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


class LineReader:
    __slots__ = (
        "_batch",
        "_began",
        "_cut",
        "_deadline",
        "_fd",
        "_framer",
        "_held",
        "_hold",
        "_line",
        "_out",
        "_receive",
    )

    def __init__(
        self,
        lines: Lines,
        stream: trio.SocketStream,
        max_line_bytes: int,
        out: LineSink,
        line: Callable[[bytes, trio.Nursery], None],
        hold: LineHold,
    ) -> None:
        """``out``: the agent's replies, whose backlog holds reading back; ``line``
        takes each line, with the nursery its requests' tasks run in; ``hold``: what
        the line not yet ended holds of what all connections may."""
        self._fd = stream.socket.fileno()
        self._framer = LineFramer(max_line_bytes)
        self._batch = lines.batch()  # the one shared batch: taken once, entered per chunk
        self._receive = lines.receive
        self._out = out
        self._line = line
        self._hold = hold
        self._held = 0  # bytes of the line not yet ended
        self._deadline = math.inf  # by when it must end (trio time)
        self._began = 0.0  # when it began (trio time)
        self._cut = trio.CancelScope()  # cancelled when it is let go to make room
        hold.on_cut = self._cut.cancel

    async def run(self, nursery: trio.Nursery) -> Oversized | Unfinished | None:
        """Hand each line on until the agent hangs up (None), until a line over the
        limit (its ``Oversized``: nothing after it is read), or until one that does
        not fit, is not ended in time, or is let go to make room (``Unfinished``)."""
        try:
            with self._cut:
                return await self._read(nursery)
            return Unfinished(self._hold.cut_for or "its line was let go to make room")
        finally:
            self._hold.release()

    async def _read(self, nursery: trio.Nursery) -> Oversized | Unfinished | None:
        fd, framer = self._fd, self._framer
        drained = False
        while True:
            try:
                if self._held:
                    data = await self._receive_by_deadline(fd, drained)
                    if data is None:
                        took = f"{self._hold.timeout:g} s"
                        return Unfinished(
                            f"it began a line and did not end it within {took} ({self._held} "
                            "bytes of it had come)"
                        )
                else:
                    data = await self._receive(fd, _READ_SIZE, drained)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return None
            if not data:
                return None
            size = len(data)
            drained = size < _READ_SIZE
            oversized = None
            with self._batch:  # requests that came together go upstream together
                for item in framer.feed(data):
                    if isinstance(item, Oversized):
                        oversized = item
                        break
                    self._line(item, nursery)
            del data  # an idle agent's last chunk is not kept while it is quiet
            if oversized is not None:
                return oversized
            held = framer.buffered
            if held or self._held:
                refusal = self._weigh(held, size)
                if refusal is not None:
                    return Unfinished(refusal)
            # A peer that sends faster than it reads waits here, not in our memory.
            if self._out.queued > self._out.limit:
                paused = trio.current_time()
                await self._out.wait_room()
                # Time mcpd did not read is not the agent's.
                self._deadline += trio.current_time() - paused

    async def _receive_by_deadline(self, fd: int, drained: bool) -> bytes | None:
        """The next chunk, or None when the line not yet ended is out of time."""
        with trio.move_on_at(self._deadline):
            return await self._receive(fd, _READ_SIZE, drained)
        return None

    def _weigh(self, held: int, size: int) -> str | None:
        """The framer holds ``held`` bytes of a line after a chunk of ``size``: why
        they do not fit (None: they do)."""
        if not held:
            self._deadline = math.inf
        elif not self._held or held < self._held + size:
            # A line begun: nothing was held, or not all of the chunk was added to what
            # was (a line ended in it, and what is held now is of one it began).
            self._began = trio.current_time()
            self._deadline = self._began + self._hold.timeout
        self._held = held
        return self._hold.weigh(held, self._began)


def apart_from_line(request: rpc.Request) -> None:
    """``request``'s params as bytes of their own: the task that answers it then keeps
    what its request says, not the agent's whole line, which keys mcpd never reads may
    pad; what it keeps is what is weighed while it is under way at a server."""
    if request.params is not None:
        request.params = request.params.copy()
