"""Per-server call latency: recent percentiles for ``mcpd status``, and a cumulative
histogram in the shape Prometheus expects, for a ``/metrics`` endpoint.

``record`` runs on every tool call, so it does a handful of C-level operations and never
allocates: samples go into a fixed ring of doubles, counts into a fixed list of buckets.
Sorting happens only when someone asks for percentiles.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Sequence
from itertools import pairwise

import msgspec

# Upper bounds in seconds, from 1 ms (a local stdio call) to 60 s (a slow tool at its timeout).
DEFAULT_BUCKETS: tuple[float, ...] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


class Histogram:
    """Fixed-bucket histogram. A value equal to a bound falls in that bucket (``le``)."""

    __slots__ = ("_counts", "bounds", "count", "sum")

    def __init__(self, bounds: Sequence[float] = DEFAULT_BUCKETS) -> None:
        if not bounds or any(b <= a for a, b in pairwise(bounds)):
            raise ValueError("bucket bounds must be non-empty and strictly increasing")
        if not all(math.isfinite(b) for b in bounds):
            raise ValueError("bucket bounds must be finite; +Inf is implied")
        self.bounds = tuple(bounds)
        # One slot per bound plus the +Inf overflow; stored per bucket, summed on export.
        self._counts = [0] * (len(self.bounds) + 1)
        self.count = 0
        self.sum = 0.0

    def cumulative(self) -> list[tuple[float, int]]:
        """``(le, count of values <= le)`` pairs, ending with ``(inf, count)``."""
        out: list[tuple[float, int]] = []
        running = 0
        for bound, n in zip((*self.bounds, math.inf), self._counts, strict=True):
            running += n
            out.append((bound, running))
        return out


class LatencySnapshot(msgspec.Struct, frozen=True):
    calls: int
    errors: int
    # Percentiles over the most recent ``samples`` calls; None before the first call.
    samples: int
    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None


class LatencyStats:
    __slots__ = ("_ring", "errors", "histogram", "window")

    def __init__(self, window: int = 1024, bounds: Sequence[float] = DEFAULT_BUCKETS) -> None:
        if window < 1:
            raise ValueError("window must be at least 1")
        self.window = window
        self._ring = array("d", bytes(8 * window))
        self.errors = 0
        self.histogram = Histogram(bounds)

    @property
    def calls(self) -> int:
        return self.histogram.count

    def record(self, duration: float, *, error: bool = False) -> None:
        hist = self.histogram
        count = hist.count
        # The call count doubles as the ring's write position.
        self._ring[count % self.window] = duration
        # The histogram is counted here, inline: this runs for every call.
        hist._counts[bisect_left(hist.bounds, duration)] += 1
        hist.count = count + 1
        hist.sum += duration
        if error:
            self.errors += 1

    def recent(self) -> list[float]:
        """The retained samples, sorted ascending."""
        n = min(self.histogram.count, self.window)
        return sorted(self._ring[:n])

    def since(self, calls: int) -> list[float]:
        """The samples of the calls recorded after the first ``calls`` ones (as many
        of them as the ring still holds), sorted ascending."""
        count = self.histogram.count
        n = min(count - calls, self.window)
        if n <= 0:
            return []
        end = count % self.window
        start = end - n
        ring = self._ring
        return sorted(ring[start:end] if start >= 0 else ring[start:] + ring[:end])

    def snapshot(self) -> LatencySnapshot:
        ordered = self.recent()
        return LatencySnapshot(
            calls=self.calls,
            errors=self.errors,
            samples=len(ordered),
            p50=nearest_rank(ordered, 0.50),
            p95=nearest_rank(ordered, 0.95),
            p99=nearest_rank(ordered, 0.99),
            max=ordered[-1] if ordered else None,
        )


def nearest_rank(ordered: Sequence[float], q: float) -> float | None:
    """The smallest sample with at least a fraction ``q`` of samples at or below it."""
    if not 0.0 <= q <= 1.0:
        raise ValueError("percentile must be within [0, 1]")
    if not ordered:
        return None
    # Rounded first so that 0.07 * 100 (7.000000000000001) is rank 7, not 8.
    rank = max(1, math.ceil(round(q * len(ordered), 9)))
    return ordered[rank - 1]
