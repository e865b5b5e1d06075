import math
import random
import tracemalloc

import msgspec
import pytest

from mcpd.servers.status.stats import DEFAULT_BUCKETS, Histogram, LatencyStats, nearest_rank


def test_empty() -> None:
    s = LatencyStats()
    snap = s.snapshot()
    assert (snap.calls, snap.errors, snap.samples) == (0, 0, 0)
    assert snap.p50 is None and snap.p99 is None and snap.max is None
    assert nearest_rank(s.recent(), 0.5) is None


def test_percentiles_on_known_samples() -> None:
    s = LatencyStats(window=1000)
    values = [i / 1000 for i in range(1, 101)]  # 1 ms .. 100 ms
    random.Random(0).shuffle(values)
    for v in values:
        s.record(v)
    snap = s.snapshot()
    assert snap.calls == 100 and snap.samples == 100
    assert snap.p50 == 0.050
    assert snap.p99 == 0.099
    assert snap.max == 0.100
    assert nearest_rank(s.recent(), 0.0) == 0.001
    assert nearest_rank(s.recent(), 1.0) == 0.100
    assert nearest_rank(s.recent(), 0.07) == 0.007  # 0.07 * 100 is 7.000000000000001 in floats


def test_percentiles_small_counts() -> None:
    s = LatencyStats()
    s.record(0.3)
    assert s.snapshot().p50 == 0.3 and s.snapshot().p99 == 0.3
    s.record(0.1)
    assert nearest_rank(s.recent(), 0.5) == 0.1
    assert nearest_rank(s.recent(), 0.99) == 0.3


def test_percentile_rejects_bad_quantile() -> None:
    s = LatencyStats()
    s.record(1.0)
    with pytest.raises(ValueError):
        nearest_rank(s.recent(), 99)


def test_errors_counted_and_timed() -> None:
    s = LatencyStats()
    s.record(0.01)
    s.record(30.0, error=True)
    s.record(0.02, error=True)
    snap = s.snapshot()
    assert snap.calls == 3 and snap.errors == 2
    assert snap.max == 30.0


def test_ring_keeps_only_recent_samples() -> None:
    s = LatencyStats(window=4)
    for v in (9.0, 9.0, 9.0, 1.0, 2.0, 3.0, 4.0):
        s.record(v)
    assert s.recent() == [1.0, 2.0, 3.0, 4.0]
    snap = s.snapshot()
    assert snap.calls == 7 and snap.samples == 4 and snap.max == 4.0
    # The histogram is cumulative over all calls, not just the window.
    assert s.histogram.count == 7
    assert s.histogram.sum == 37.0


def test_memory_bounded_after_a_million_records() -> None:
    s = LatencyStats(window=256)
    rng = random.Random(1)
    for _ in range(1_000_000):
        s.record(rng.random() / 10)
    assert s.calls == 1_000_000
    assert len(s.recent()) == 256
    assert len(s.histogram.cumulative()) == len(DEFAULT_BUCKETS) + 1
    # And recording keeps nothing: traced over a further stretch, nothing accumulates.
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(100_000):
            s.record(0.005)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(d.size_diff for d in after.compare_to(before, "filename"))
    assert grown < 4096
    assert nearest_rank(s.recent(), 0.5) == 0.005


def test_histogram_buckets_are_le_and_cumulative() -> None:
    s = LatencyStats(bounds=(0.1, 1.0, 10.0))
    for v in (0.05, 0.1, 0.5, 1.0, 2.0, 100.0):
        s.record(v)
    h = s.histogram
    assert h.cumulative() == [(0.1, 2), (1.0, 4), (10.0, 5), (math.inf, 6)]
    assert h.count == 6
    assert h.sum == pytest.approx(103.65)


def test_default_buckets_span_1ms_to_60s() -> None:
    s = LatencyStats()
    h = s.histogram
    assert h.bounds == DEFAULT_BUCKETS
    assert h.bounds[0] == 0.001 and h.bounds[-1] == 60.0
    s.record(0.0005)
    s.record(61.0)
    pairs = h.cumulative()
    assert pairs[0] == (0.001, 1)
    assert pairs[-2] == (60.0, 1)
    assert pairs[-1] == (math.inf, 2)
    assert len(pairs) == len(DEFAULT_BUCKETS) + 1


@pytest.mark.parametrize("bounds", [(), (1.0, 1.0), (2.0, 1.0), (1.0, math.inf)])
def test_histogram_rejects_bad_bounds(bounds: tuple[float, ...]) -> None:
    with pytest.raises(ValueError):
        Histogram(bounds)


def test_window_must_be_positive() -> None:
    with pytest.raises(ValueError):
        LatencyStats(window=0)


def test_snapshot_encodes_to_json() -> None:
    s = LatencyStats()
    s.record(0.25)
    data = msgspec.json.decode(msgspec.json.encode(s.snapshot()))
    assert data == {
        "calls": 1,
        "errors": 0,
        "samples": 1,
        "p50": 0.25,
        "p95": 0.25,
        "p99": 0.25,
        "max": 0.25,
    }
