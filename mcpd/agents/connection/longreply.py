"""A reply written piece by piece as its agent reads it, and what waits behind it.

A listing of 10,000 tools made whole was the daemon's peak memory; written in pieces,
each piece is made once the one before it has mostly been taken. While such a line is
being written nothing else may enter it, so the lines put meanwhile are held and sent
when it ends, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

import trio

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.result_pieces import BrokenPiece

from ..daemon_seam import LineSink

# A long reply's next piece is made once this little of it is still queued.
_PIECES_QUEUED: Final = 256 * 1024

PutReply = Callable[[bytes, rpc.Id | None], None]


class LongReplies:
    __slots__ = ("_broken", "_lock", "_out", "_put", "held")

    def __init__(self, out: LineSink, put: PutReply, broken: Callable[[BrokenPiece], None]):
        """``put`` queues a line as the connection does; ``broken`` hears of a piece
        that is not JSON (a fault in mcpd: the line cannot be finished)."""
        self._out = out
        self._put = put
        self._broken = broken
        # Lines put while a long reply is being written (None: none is).
        self.held: list[tuple[bytes, rpc.Id | None]] | None = None
        self._lock = trio.Lock()  # one at a time: two would be written into each other

    async def send(self, pieces: Iterable[bytes | memoryview]) -> None:
        async with self._lock:
            held: list[tuple[bytes, rpc.Id | None]] = []
            self.held = held
            try:
                # A line once begun is finished (or the connection ends): a cancelled
                # request in the middle would leave the agent half a message.
                with trio.CancelScope(shield=True):
                    for piece in pieces:
                        if self._out.closed:
                            return  # the agent is gone: the rest need not be made
                        self._out.put_piece(piece)
                        await self._out.wait_room(_PIECES_QUEUED)
                    self._out.put_piece(b"", end=True)
            except BrokenPiece as exc:
                # Whatever is put from now on would be written into the unfinished
                # line, as if it were part of it: nothing more is written.
                self._out.close()
                self._broken(exc)
            finally:
                self.held = None
                for data, rid in held:
                    self._put(data, rid)
