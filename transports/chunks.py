"""A chunk at a time: what a pipe or socket has, read with one pass through trio's
loop, and the writes made while handling it, held back to leave together as it ends.

trio's pipe read yields before it tries the read and then waits for the pipe when it
finds nothing: two passes for each answer of a server that answers one request at a
time. Its socket read tries first and waits only when there is nothing, which costs a
failed system call (and an exception) whenever the peer has not written yet, and a
peer answering one request at a time nearly never has.

``receive`` tries first, as trio's sockets do, unless the caller says the last read
emptied the buffer (it returned less than it asked for): then it waits first. A read
that finds data at once still yields (without losing the data to a cancellation), so
a peer that floods cannot starve the rest.

A reader handling a chunk of many messages answers them inside one ``batch``, so the
answers leave with one system call (and one wake-up of the peer) instead of one each.
The block must not await: trio runs one task at a time, so nothing else can write
meanwhile, and blocks nest only inside one task's run, the outermost one flushing.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import Final

import trio


async def receive(fd: int, max_bytes: int, wait_first: bool = False) -> bytes:
    """Up to ``max_bytes`` from ``fd``; b"" at its end. Raises trio.BrokenResourceError,
    or trio.ClosedResourceError when the fd was closed."""
    if not wait_first:
        try:
            data = os.read(fd, max_bytes)
        except BlockingIOError:
            pass
        except OSError as exc:
            raise _error(exc) from None
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return data
    while True:
        await trio.lowlevel.wait_readable(fd)
        try:
            return os.read(fd, max_bytes)
        except BlockingIOError:
            continue
        except OSError as exc:
            raise _error(exc) from None


def _error(exc: OSError) -> trio.BrokenResourceError | trio.ClosedResourceError:
    if exc.errno == errno.EBADF:
        return trio.ClosedResourceError("the pipe or socket was already closed")
    return trio.BrokenResourceError(str(exc))


class Batch:
    """The one batch there is, entered as a block. One shared object, not a generator
    context manager: it is entered for every chunk read."""

    __slots__ = ("_depth", "flushes")

    def __init__(self) -> None:
        self._depth = 0
        # Inside a batch: the flush of each writer that was put a line in it, once each
        # (a writer adds its own and notes that it did). None outside any batch.
        self.flushes: list[Callable[[], None]] | None = None

    def __enter__(self) -> None:
        self._depth += 1
        if self._depth == 1:
            self.flushes = []

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self._depth -= 1
        if self._depth:
            return
        flushes, self.flushes = self.flushes, None
        for flush in flushes or ():
            flush()


BATCH: Final = Batch()


def batch() -> Batch:
    return BATCH
