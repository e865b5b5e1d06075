"""The most memory a piece of work held at once, as Python's allocator traced it: what
a test reads to tell whether a value was built or skipped over."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

from protocol.jsonrpc import messages as rpc


def peak_bytes(work: Callable[[], object]) -> int:
    """The peak of traced memory while ``work`` runs, above what was held before."""
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        work()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - base


def size(msg: rpc.Notification) -> int:
    """The bytes of a notification's params: what a copy or two of them takes, far
    less than what the values in them take once built."""
    return len(msg.params or b"")
