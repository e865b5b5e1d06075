"""The calls whose records the file could not take (a full disk, a file refused): how
many, and when the first and the last of them came. The next batch the file takes
begins with a ``Gap`` line that says so; until one does, the count goes on.

A full disk takes part of a batch before it refuses the rest: the records that reached
the file whole are in it, and are not counted; the one cut short is (its line is read
as no record).
"""

from __future__ import annotations

import math
from typing import Final

import msgspec
from msgspec import UnsetType

from .record import CallRecord, Gap, iso

# What one line of a batch stands for: how many calls, and when the first and the last
# of them came.
Span = tuple[int, float, float]
_encode: Final = msgspec.json.Encoder().encode


def spans(
    records: list[CallRecord], summaries: list[CallRecord], dropped: int, now: float
) -> list[Span]:
    """The calls of a batch's lines, in the order they are written: its records, its
    summaries, then its line of the records dropped before it (which came by ``now``)."""
    out = [(1, r.ts, r.ts) for r in records]
    for s in summaries:
        out.append((s.calls, s.ts, s.ts if isinstance(s.last_ts, UnsetType) else s.last_ts))
    if dropped:
        out.append((dropped, now, now))
    return out


class Lost:
    def __init__(self) -> None:
        self.calls = 0
        self.first = math.inf
        self.last = -math.inf

    def gap_line(self, now: float) -> bytes:
        """The line to write before the next batch: none while no call is lost."""
        if not self.calls:
            return b""
        first, last = self.first, self.last
        gap = Gap(time=iso(now), ts=now, lost=self.calls, first_time=iso(first), first_ts=first,
                  last_time=iso(last), last_ts=last)  # fmt: skip
        return _encode(gap) + b"\n"

    def said(self) -> None:
        """The gap line reached the file."""
        self.calls, self.first, self.last = 0, math.inf, -math.inf

    def failed(self, head: bytes, lines: bytes, taken: int, batch: list[Span]) -> int:
        """The file took ``taken`` bytes of ``head`` (the gap line) and ``lines`` (the
        batch, one line for each of ``batch``) before it refused the rest: how many of
        ``batch`` it took whole."""
        if head and taken >= len(head):
            self.said()
        whole = lines.count(b"\n", 0, max(taken - len(head), 0))
        for calls, first, last in batch[whole:]:
            self.calls += calls
            self.first = min(self.first, first)
            self.last = max(self.last, last)
        return whole
