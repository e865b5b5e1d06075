"""What one agent connection writes, in the order it was put: every reply and
notification goes through one ``LineWriter``, so progress precedes its response and
replies that pile up are written in one go.

A line put while a long reply is being written waits behind it; an answer to a request
of a JSON-RPC batch waits for the rest of its batch; a line that is not one line of
JSON is never written.

A long reply is written piece by piece as its agent reads it (``LongReplies``): a
listing of 10,000 tools made whole was the daemon's peak memory; written in pieces,
each piece is made once the one before it has mostly been taken. While such a line is
being written nothing else may enter it, so the lines put meanwhile are held and sent
when it ends, in order. Whether a message waits for room or is dropped when the agent
reads slowly is the connection's to decide (``Connection.send``, ``send_nowait``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Final

import trio

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.result_pieces import BrokenPiece
from protocol.lines.oneline import line_fault
from protocol.shown.logfields import log_extra

from ..daemon_seam import Lines, LineSink
from .batches import Batches

logger = logging.getLogger("mcpd.agents")

_WRITE_TIMEOUT: Final = 30.0
# Replies queued for one agent before send() waits; a legacy HTTP session holds its
# unsent news to the same (``http.stream``).
QUEUE_BYTES: Final = 4 * 1024 * 1024
# A long reply's next piece is made once this little of it is still queued.
_PIECES_QUEUED: Final = 256 * 1024

PutReply = Callable[[bytes, rpc.Id | None], None]


class LongReplies:
    """A reply written piece by piece as its agent reads it, and the lines put
    meanwhile, held behind it."""

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


class Outbox:
    __slots__ = ("_close", "_label", "batches", "long", "out")

    def __init__(
        self,
        lines: Lines,
        stream: trio.SocketStream,
        label: str,
        close: Callable[[], None],
    ) -> None:
        """``label`` names the agent in the log; ``close`` ends the connection (its
        writer stopped, or a long reply broke half-way)."""
        self._label = label
        self._close = close
        self.out: LineSink = lines.writer(stream, stream.socket.fileno(), QUEUE_BYTES, line_fault)
        # Requests of JSON-RPC batches waiting for answers: what they hold is bounded as
        # what is queued is.
        self.batches = Batches(QUEUE_BYTES)
        self.long = LongReplies(self.out, self.put, self._broken_piece)

    def put(self, data: bytes, rid: rpc.Id | None) -> None:
        """Queue ``data`` (``rid``: the request it answers) behind what was put before."""
        held = self.long.held
        if held is not None:
            held.append((data, rid))
            return
        batches = self.batches
        if batches and rid is not None and rid in batches:
            whole = batches.answer(rid, data)
            if whole is None:
                return  # held for the rest of its batch
            data, rid = whole, None
        fault = self.out.put(data)
        if fault is None:
            return
        # Never pass a broken line on: the agent would lose its whole session to it.
        # It is mcpd's own fault, so it is logged as one, and the request (if this was
        # its answer) still gets an answer, an error that says what happened.
        logger.error(
            "did not send a message to %s: %s (a fault in mcpd; %s)",
            self._label,
            fault,
            "answered with an error instead" if rid is not None else "dropped",
            extra=log_extra(None, "broken_line", fault),
        )
        if rid is not None:
            self.out.put(
                rpc.encode_error(
                    rid,
                    rpc.INTERNAL_ERROR,
                    f"mcpd could not deliver the answer to this request: {fault}. "
                    "This is a fault in mcpd and was logged.",
                )
            )

    def unbatch(self, rid: rpc.Id) -> None:
        """``rid`` ended without an answer: its batch may be complete without it."""
        if self.batches and rid in self.batches:
            line = self.batches.drop(rid)
            if line is not None:
                self.put(line, None)

    def _broken_piece(self, exc: BrokenPiece) -> None:
        logger.error(
            "stopped writing a reply to %s half-way: %s (a fault in mcpd); closing its connection",
            self._label,
            exc,
            extra=log_extra(None, "broken_line", str(exc)),
        )
        self._close()

    async def run(self) -> None:
        """Write what is put until the agent stops reading or hangs up; then the
        connection ends."""
        try:
            await self.out.run(_WRITE_TIMEOUT)
        except trio.TooSlowError:
            logger.warning(
                "%s stopped reading its replies for %.0f s; closing its connection",
                self._label,
                _WRITE_TIMEOUT,
                extra=log_extra(None, reason="peer not reading"),
            )
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            self.out.close()
        self._close()
