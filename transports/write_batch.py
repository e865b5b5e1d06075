"""Writes held back over a block and done when it ends, one write per writer.

A reader handling a chunk of many messages answers them inside one batch, so the
answers leave with one system call (and one wake-up of the peer) instead of one each.
The block must not await: trio runs one task at a time, so nothing else can write
meanwhile, and blocks nest only inside one task's run, the outermost one flushing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final


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
