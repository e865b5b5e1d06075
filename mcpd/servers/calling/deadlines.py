"""When a server's calls run out of time: one heap of deadlines, and the timer's sleep.

A call's entry is not taken out of the middle of the heap when the call ends or its
deadline moves: it stays behind, and counts only while it is still the call's deadline
and the call is still under way. Stale entries go where they come first, as they mostly
do, or in one sweep once they outnumber the calls under way. The timer sleeps until the
first deadline, its own or the first queued call's, and is woken only for an earlier one.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterator
from typing import Final

import trio

from .calls import Call, CallState

_LIVE: Final[frozenset[CallState]] = frozenset({"queued", "running"})


def _current(entry: tuple[float, int, Call]) -> bool:
    at, _, call = entry
    return at == call.deadline and call.state in _LIVE


class Deadlines:
    def __init__(self, live: Callable[[], int]) -> None:
        """``live()``: how many calls are under way (asked only when the heap has grown,
        not on every call)."""
        self._live = live
        self._heap: list[tuple[float, int, Call]] = []
        self._seq = itertools.count()
        self._wake = trio.Event()
        self._asleep_until = math.inf  # when the timer wakes next (inf: at no deadline)

    def set(self, call: Call, at: float) -> None:
        """``call`` runs out of time ``at``."""
        call.deadline = at
        heap = self._heap
        if len(heap) > 64 and len(heap) > 4 * self._live():
            # Finished calls leave their entries behind until their deadline; with a
            # minute-long timeout that is a lot of them. Drop them in one sweep.
            heap[:] = [e for e in heap if _current(e)]
            heapq.heapify(heap)
        heapq.heappush(heap, (at, next(self._seq), call))
        if at < self._asleep_until:  # as ``coming`` does, on every call's path
            self._wake.set()

    def coming(self, at: float) -> None:
        """A deadline ``at`` (a running call's, or a queued one's): the timer is woken
        only if it sleeps past it. Each wake costs a pass of its task, and with finished
        calls leaving the heap, every call at one at a time would otherwise be first."""
        if at < self._asleep_until:
            self._wake.set()

    def drop_ended(self) -> None:
        """Drop the stale entries at the head of the heap: a kept one keeps its call and
        the call's reply alive long enough for the garbage collector to run over them,
        on every server's call path."""
        heap = self._heap
        while heap:
            at, _, call = heap[0]
            if at == call.deadline and call.state in _LIVE:
                break
            heapq.heappop(heap)

    def due(self, now: float) -> Iterator[Call]:
        """The running calls whose time is up at ``now``, each taken off the heap."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, _, call = heapq.heappop(heap)
            if at == call.deadline and call.state == "running":
                yield call

    async def sleep(self, queued: float) -> None:
        """Until the first deadline, the heap's or ``queued`` (the first queued call's),
        or until an earlier one comes."""
        self._wake = trio.Event()
        self._asleep_until = min(self._heap[0][0] if self._heap else math.inf, queued)
        with trio.move_on_at(self._asleep_until):
            await self._wake.wait()
