"""Reading one agent's socket: each chunk as it comes, framed into lines handed on one
by one, the writes a chunk causes batched together, and nothing more read while the
agent leaves its replies unread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import trio

from protocol.jsonrpc import messages as rpc
from protocol.lines.framing import LineFramer, Oversized

from ..daemon_seam import Lines, LineSink

_READ_SIZE: Final = 65536


class LineReader:
    __slots__ = ("_batch", "_fd", "_framer", "_line", "_out", "_receive")

    def __init__(
        self,
        lines: Lines,
        stream: trio.SocketStream,
        max_line_bytes: int,
        out: LineSink,
        line: Callable[[bytes, trio.Nursery], None],
    ) -> None:
        """``out``: the agent's replies, whose backlog holds reading back; ``line``
        takes each line, with the nursery its requests' tasks run in."""
        self._fd = stream.socket.fileno()
        self._framer = LineFramer(max_line_bytes)
        self._batch = lines.batch()  # the one shared batch: taken once, entered per chunk
        self._receive = lines.receive
        self._out = out
        self._line = line

    async def run(self, nursery: trio.Nursery) -> Oversized | None:
        """Hand each line on until the agent hangs up (None), or until a line over the
        limit (its ``Oversized``: nothing after it is read)."""
        fd = self._fd
        drained = False
        while True:
            try:
                data = await self._receive(fd, _READ_SIZE, drained)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return None
            if not data:
                return None
            drained = len(data) < _READ_SIZE
            oversized = None
            with self._batch:  # requests that came together go upstream together
                for item in self._framer.feed(data):
                    if isinstance(item, Oversized):
                        oversized = item
                        break
                    self._line(item, nursery)
            del data  # an idle agent's last chunk is not kept while it is quiet
            if oversized is not None:
                return oversized
            # A peer that sends faster than it reads waits here, not in our memory.
            if self._out.queued > self._out.limit:
                await self._out.wait_room()


def apart_from_line(request: rpc.Request) -> None:
    """``request``'s params as bytes of their own: the task that answers it then keeps
    what its request says, not the agent's whole line, which keys mcpd never reads may
    pad; what it keeps is what is weighed while it is under way at a server."""
    if request.params is not None:
        request.params = request.params.copy()
