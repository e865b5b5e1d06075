"""Counting the work a piece of code does, in bytecodes run: a measure of cost that
load on the machine cannot change, for what a step counter of the code's own would
miss (a loop that counts nothing)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any


class TooMuchWork(AssertionError):
    pass


class Meter:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    def _line(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            self.count += 1
            if self.count > self.limit:
                raise TooMuchWork(f"more than {self.limit} bytecodes")
        return self._line

    def _call(self, frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return self._line


@contextlib.contextmanager
def bytecodes(limit: int) -> Iterator[Meter]:
    """Count the bytecodes run inside the block (in functions it calls); past
    ``limit``, fail at once rather than run on."""
    meter = Meter(limit)
    old = sys.gettrace()
    sys.settrace(meter._call)
    try:
        yield meter
    finally:
        sys.settrace(old)
