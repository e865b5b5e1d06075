"""Newline-delimited output to a non-blocking pipe or socket, cheaply.

When nothing is queued, a line is written at once with one ``writev`` from the task
that produced it: a request costs no wake-up of a writer task. Otherwise lines are
queued and a writer task sends everything queued in one write, so many calls in
flight cost one system call (and one wake-up of the peer) per batch, not one each.
Inside a ``chunks.batch`` block nothing is written: the writer is flushed as it ends.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Final

import trio

from .chunks import BATCH

DEFAULT_LIMIT: Final = 16 * 1024 * 1024
# A line longer than this is queued by reference, not copied into the buffer: a copy
# costs more than one more piece to write, and a long tool list's would be a peak.
_BIG: Final = 4 * 1024
# writev takes at most IOV_MAX (1024 on Linux) buffers at a time.
_MAX_PARTS: Final = 512
# The end of a line queued as a part of its own (``put_own``): it goes with the line.
_END: Final = b"\n"


class LineWriter:
    def __init__(
        self,
        stream: trio.abc.SendStream,
        fd: int,
        limit: int = DEFAULT_LIMIT,
        check: Callable[[bytes], str | None] | None = None,
    ) -> None:
        # Held, not written through: writes go to ``fd`` itself, which the stream owns.
        self._stream = stream
        self._check = check
        self._fd = fd
        self.limit = limit
        # What is queued: ``_parts`` (big lines, and earlier small ones) then ``_buf``.
        self._parts: list[bytes | bytearray | memoryview] = []
        self._parked = 0  # bytes in _parts
        self._buf = bytearray()
        self._busy = False
        self._ready = trio.Event()
        self._room = trio.Event()
        self._room_waiters = 0  # tasks in ``wait_room``: a flush tells them of room
        self._drained = trio.Event()
        self._drained.set()
        self._held = False  # its flush is in the batch under way
        self._closed = False
        # What the writer task is writing: the queue as it was when it took it, each
        # part emptied as it is written (or taken back), from ``_next`` on unwritten.
        self._sending: list[bytes | bytearray | memoryview] = []
        self._next = 0
        self._inflight = 0  # bytes of _sending not yet written
        self.error: OSError | None = None
        self.refused = 0  # lines not written because ``check`` refused them
        # Called (from the writer) when what waits to be written drops below ``limit``.
        self.on_room: Callable[[], None] | None = None

    @property
    def closed(self) -> bool:
        """Nothing more will be written (the writer task ended)."""
        return self._closed

    @property
    def queued(self) -> int:
        """The bytes waiting to be written: queued, and what the writer task is writing."""
        return self._parked + len(self._buf) + self._inflight

    @property
    def has_room(self) -> bool:
        """Whether a line put now would be written (in turn) with less than ``limit``
        before it."""
        return self.queued < self.limit and self.error is None and not self._closed

    def _queue(self, line: bytes | memoryview, end: bytes = b"\n") -> None:
        """Add ``line`` and ``end`` (a newline, unless more of the line follows) at the
        end of the queue."""
        if len(line) > _BIG:
            if self._buf:
                self._parts.append(self._buf)
                self._parked += len(self._buf)
                self._buf = bytearray()
            self._parts.append(line)
            self._parked += len(line)
        else:
            self._buf += line
        self._buf += end

    def _consume(self, done: int) -> None:
        """Drop the first ``done`` bytes of the queue (they were written)."""
        parts = self._parts
        while done and parts:
            first = parts[0]
            if done < len(first):
                parts[0] = memoryview(first)[done:]
                self._parked -= done
                return
            done -= len(first)
            self._parked -= len(first)
            del parts[0]
        if done:
            del self._buf[:done]

    def _all(self) -> tuple[bytes | bytearray | memoryview, ...]:
        if len(self._parts) < _MAX_PARTS:
            return (*self._parts, self._buf)
        return tuple(self._parts[:_MAX_PARTS])

    def put(self, line: bytes) -> str | None:
        """Queue (or write) ``line`` and a newline. Never blocks.

        A line that ``check`` finds fault with (for JSON-RPC peers: not exactly one
        line of JSON) is not written at all: the reason is returned (and counted in
        ``refused``) for the caller to answer in its place.
        """
        if self._check is not None:
            fault = self._check(line)
            if fault is not None:
                self.refused += 1
                return fault
        self.put_spliced(line)
        return None

    def put_spliced(self, line: bytes) -> None:
        """``put`` without the check: for a line ``put`` has checked, or a ``Spliced``
        one, which is one line of JSON by the way it was built (``protocol.jsonrpc.splice``)."""
        if self.error is not None or self._closed:
            return
        held = BATCH.flushes
        if held is not None:
            if len(line) > _BIG:
                self._queue(line)
            else:
                buf = self._buf
                buf += line
                buf += b"\n"
            if not self._held:
                self._held = True
                held.append(self.flush)
            return
        if not self._buf and not self._parts and not self._busy:
            done = self._write_now((line, b"\n"))
            if done is None or done == len(line) + 1:
                return
            # Keep only the unwritten rest (a big reply), by reference.
            if done < len(line):
                self._queue(memoryview(line)[done:])
            else:
                self._buf += b"\n"
        else:
            self._queue(line)
        self._wake_writer()

    def put_own(self, line: bytes) -> memoryview | None:
        """``put_spliced`` for a line its owner may take back (``withdraw``) until any of
        it is written: queued as a part of its own, never copied into a batch. Returns
        what to take it back by, or None if it was written at once (whole or begun)."""
        if self.error is not None or self._closed:
            return None
        if BATCH.flushes is None and not self._buf and not self._parts and not self._busy:
            done = self._write_now((line, _END))
            if done is None or done == len(line) + 1:
                return None
            if done == 0:
                # None of it went (a full pipe takes a short write whole or not at all):
                # queued as a part of its own, it may still be taken back.
                return self._own_part(line)
            if done < len(line):
                self._queue(memoryview(line)[done:])
            else:
                self._buf += _END
            self._wake_writer()
            return None
        return self._own_part(line)

    def _own_part(self, line: bytes) -> memoryview:
        own = memoryview(line)
        if self._buf:
            self._parts.append(self._buf)
            self._parked += len(self._buf)
            self._buf = bytearray()
        self._parts += (own, _END)
        self._parked += len(own) + 1
        held = BATCH.flushes
        if held is None:
            self._wake_writer()
        elif not self._held:
            self._held = True
            held.append(self.flush)
        return own

    def withdraw(self, own: memoryview) -> bool:
        """Take back the line ``put_own`` returned ``own`` for, if none of it has been
        written: whether it was (a line begun is left to end, or the peer would read
        half of it and then whatever follows as its rest)."""
        parts = self._parts
        for i, part in enumerate(parts):
            if part is own:
                del parts[i : i + 2]  # and its end
                self._parked -= len(own) + 1
                return True
        sending = self._sending
        for i in range(self._next, len(sending)):
            if sending[i] is own:
                # Emptied, not removed: the writer task walks the list by index.
                sending[i] = sending[i + 1] = b""
                self._inflight -= len(own) + 1
                return True
        return False

    def put_piece(self, piece: bytes | memoryview, end: bool = False) -> None:
        """Queue part of a line, by reference if it is big; ``end`` closes the line.

        For a reply too long to be made whole first: its pieces are made as the peer
        takes them (see ``wait_room``). The caller checks each piece, and puts nothing
        else until the line ends: another line put meanwhile would land inside it."""
        if self.error is not None or self._closed:
            return
        self._queue(piece, b"\n" if end else b"")
        held = BATCH.flushes
        if held is not None:
            if not self._held:
                self._held = True
                held.append(self.flush)
        else:
            self.flush()

    def flush(self) -> None:
        """Write what a batch held back: at once if possible, else by the writer task."""
        self._flush()
        if self._room_waiters or self.on_room is not None:
            self._made_room()

    def _flush(self) -> None:
        self._held = False
        buf = self._buf
        if self.error is not None or self._closed or not (buf or self._parts):
            return
        if not self._busy:
            if self._parts:
                done = self._write_now(self._all())
                if done is None:
                    return
                if done == self._parked + len(buf) and len(self._parts) < _MAX_PARTS:
                    self._parts.clear()  # all of it went: nothing to take off piece by piece
                    self._parked = 0
                    buf.clear()
                    return
                self._consume(done)
            else:
                # The usual batch: small lines only, all in the buffer.
                done = self._write_now((buf,))
                if done is None:
                    return
                if done == len(buf):
                    buf.clear()
                    return
                del buf[:done]
            if not self.queued:
                return
        self._wake_writer()

    def _write_now(self, parts: tuple[bytes | bytearray | memoryview, ...]) -> int | None:
        """Write what the fd takes right now: the byte count, or None if it failed (the
        writer task then raises the error)."""
        try:
            return os.writev(self._fd, parts)
        except BlockingIOError:
            return 0
        except OSError as exc:
            self.error = exc
            self._ready.set()
            return None

    def _made_room(self) -> None:
        self._room.set()
        if self.on_room is not None and self.has_room:
            self.on_room()

    def _wake_writer(self) -> None:
        if self._drained.is_set():
            self._drained = trio.Event()
        self._ready.set()

    async def wait_room(self, limit: int | None = None) -> None:
        """Wait while more than ``limit`` (by default ``self.limit``) bytes are queued
        (the peer reads slowly), or until the writer is closed."""
        most = self.limit if limit is None else limit
        while self.queued > most and self.error is None and not self._closed:
            if self._room.is_set():  # a new one, but not under another waiter's feet
                self._room = trio.Event()
            self._room_waiters += 1
            try:
                await self._room.wait()
            finally:
                self._room_waiters -= 1

    async def drain(self) -> None:
        await self._drained.wait()

    async def run(self, write_timeout: float | None = None) -> None:
        """The writer task. Raises trio.TooSlowError when a write takes longer than
        ``write_timeout``, or the OSError/trio error that broke the stream."""
        while True:
            await self._ready.wait()
            self._ready = trio.Event()
            if self.error is not None:
                raise self.error
            if not self.queued:
                continue
            # Hand the queue itself to the write and start a new one: no copy.
            self._sending, self._parts = self._parts, []
            self._sending.append(self._buf)
            self._inflight, self._parked = self.queued, 0
            self._buf = bytearray()
            self._busy = True
            try:
                with trio.fail_after(math.inf if write_timeout is None else write_timeout):
                    await self._send()
            finally:
                self._busy = False
                # Not held while the next line is awaited: it may be a megabyte-long list.
                self._sending, self._next, self._inflight = [], 0, 0
            if not self.queued:
                self._drained.set()

    async def _send(self) -> None:
        """Write every part of ``_sending`` in as few system calls as the peer's room
        allows: one ``writev`` for all that fits, a wait for room only when none is left
        (a stream's ``send_all`` per part would pass through the loop once for each)."""
        fd = self._fd
        left = self._sending
        while not self._closed:
            start = self._next
            while start < len(left) and not len(left[start]):
                start += 1  # written, taken back, or an empty buffer
            self._next = start
            if start == len(left):
                return
            try:
                done = os.writev(fd, left[start : start + _MAX_PARTS])
            except BlockingIOError:
                await trio.lowlevel.wait_writable(fd)
                continue
            self._inflight -= done
            while done:
                first = left[start]
                if done < len(first):
                    left[start] = memoryview(first)[done:]
                    break
                done -= len(first)
                left[start] = b""  # not held once written
                start += 1
            self._next = start
            self._made_room()

    def close(self) -> None:
        """Wake anyone waiting for room or a drain; nothing more will be written (its
        owner calls this before it closes the stream: the fd's number may be reused)."""
        self._closed = True
        self._room.set()
        self._drained.set()
