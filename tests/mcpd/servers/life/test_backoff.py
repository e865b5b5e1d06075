import random

import msgspec
import pytest

from mcpd.servers.life.backoff import BackoffConfig, Restart, RestartPolicy, RestartState

NO_JITTER = BackoffConfig(base=0.5, cap=8.0, jitter="none", max_restarts=5, window=60.0)


def state(p: RestartPolicy) -> RestartState:
    # A call, not the property, so mypy does not narrow it across the state changes.
    return p.state


def run_and_die(p: RestartPolicy, now: float, uptime: float) -> tuple[float, Restart]:
    """Start at ``now``, die ``uptime`` later; return when the restart is due."""
    p.on_start(now)
    r = p.on_failure(now + uptime)
    return r.at, r


def test_initial_state() -> None:
    p = RestartPolicy()
    assert state(p) == "idle"
    assert p.restarts == 0 and p.failures == 0
    assert not p.in_crash_loop
    assert p.stable_at is None


def test_exponential_growth_and_cap_without_jitter() -> None:
    # A window too short to see a crash loop, so only the exponent is exercised.
    p = RestartPolicy(msgspec.structs.replace(NO_JITTER, window=0.001))
    now = 0.0
    delays = []
    for _ in range(8):
        now, r = run_and_die(p, now, 1.0)
        delays.append(r.delay)
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0]
    assert p.restarts == 8 and p.failures == 8
    assert state(p) == "backoff"
    assert not p.in_crash_loop


def test_full_jitter_within_bounds_and_seeded() -> None:
    cfg = BackoffConfig(base=0.5, cap=10.0, jitter="full", window=0.001)

    def delays(seed: int) -> list[float]:
        p = RestartPolicy(cfg, rng=random.Random(seed))
        now, out = 0.0, []
        for _ in range(40):
            now, r = run_and_die(p, now, 1.0)
            out.append(r.delay)
        return out

    first = delays(7)
    assert first == delays(7)
    assert first != delays(8)
    for n, d in enumerate(first):
        assert 0.0 <= d <= min(10.0, 0.5 * 2**n)
    # Not stuck at the bottom: once capped, some delays land in the upper half.
    assert any(d > 5.0 for d in first[10:])


def test_decorrelated_jitter_within_bounds() -> None:
    cfg = BackoffConfig(base=0.5, cap=10.0, jitter="decorrelated", window=0.001)
    p = RestartPolicy(cfg, rng=random.Random(3))
    now, previous = 0.0, 0.5
    seen = []
    for _ in range(200):
        now, r = run_and_die(p, now, 1.0)
        assert 0.5 <= r.delay <= min(10.0, previous * 3)
        previous = r.delay
        seen.append(r.delay)
    assert max(seen) > 5.0


def test_crash_loop_after_max_restarts_within_window() -> None:
    p = RestartPolicy(NO_JITTER)
    now = 0.0
    results, looping = [], []
    for _ in range(5):
        now, r = run_and_die(p, now, 0.1)
        results.append(r)
        looping.append(p.in_crash_loop)
    assert looping == [False, False, False, False, True]
    assert [r.entered_crash_loop for r in results] == [False, False, False, False, True]
    assert results[-1].delay == 8.0  # the cap, no jitter
    assert results[-1].failures == 5
    assert p.in_crash_loop
    assert state(p) == "crash_loop"
    # Further deaths stay in the loop at the capped interval, and do not re-announce it.
    now, r = run_and_die(p, now, 0.1)
    assert p.in_crash_loop and not r.entered_crash_loop and r.delay == 8.0
    p.on_start(now)
    assert state(p) == "running"
    assert p.in_crash_loop


def test_crash_loop_ignores_jitter() -> None:
    p = RestartPolicy(BackoffConfig(cap=60.0, jitter="full"), rng=random.Random(1))
    now = 0.0
    for _ in range(5):
        now, r = run_and_die(p, now, 0.0)
    assert p.in_crash_loop and r.delay == 60.0


@pytest.mark.parametrize(("last", "loops"), [(60.0, True), (60.001, False)])
def test_crash_loop_window_edge(last: float, loops: bool) -> None:
    p = RestartPolicy(msgspec.structs.replace(NO_JITTER, base=0.001, cap=0.001))
    for t in (0.0, 15.0, 30.0, 45.0, last):
        p.on_start(t - 0.001)
        r = p.on_failure(t)
    assert r.entered_crash_loop is loops


def test_no_crash_loop_when_deaths_are_spread_out() -> None:
    # Each uptime is short of stable_after, so failures keep counting; the deaths are just
    # too far apart for max_restarts of them to fit in one window.
    p = RestartPolicy(msgspec.structs.replace(NO_JITTER, stable_after=30.0))
    now = 0.0
    for _ in range(20):
        now, _ = run_and_die(p, now, 16.0)
        assert not p.in_crash_loop
    assert p.failures == 20
    assert state(p) == "backoff"


def test_stability_resets_failures_and_backoff() -> None:
    p = RestartPolicy(msgspec.structs.replace(NO_JITTER, window=0.001, stable_after=30.0))
    now = 0.0
    for _ in range(4):
        now, r = run_and_die(p, now, 1.0)
    assert r.delay == 4.0 and p.failures == 4
    # Up for exactly stable_after before dying: starts over at base.
    now, r = run_and_die(p, now, 30.0)
    assert r.delay == 0.5 and r.failures == 1
    assert p.restarts == 5


def test_stability_ends_crash_loop() -> None:
    p = RestartPolicy(NO_JITTER)
    now = 0.0
    for _ in range(5):
        now, r = run_and_die(p, now, 0.1)
    assert p.in_crash_loop
    p.on_start(now)
    assert p.stable_at == now + 30.0
    assert not p.refresh(now + 29.9)
    assert p.in_crash_loop
    assert p.refresh(now + 30.0)
    assert not p.in_crash_loop and p.failures == 0
    assert not p.refresh(now + 31.0)  # nothing left to forget
    r = p.on_failure(now + 40.0)
    assert not p.in_crash_loop and r.delay == 0.5 and r.failures == 1


def test_refresh_needs_a_running_server() -> None:
    p = RestartPolicy(NO_JITTER)
    p.on_failure(0.0)
    assert not p.refresh(1000.0)
    assert p.failures == 1


def test_failure_without_start_counts_as_zero_uptime() -> None:
    p = RestartPolicy(NO_JITTER)
    now = 0.0
    results = [p.on_failure(now + i) for i in range(5)]
    assert [r.delay for r in results[:4]] == [0.5, 1.0, 2.0, 4.0]
    assert results[4].entered_crash_loop


def test_growth_never_overflows() -> None:
    cfg = BackoffConfig(base=1.0, cap=60.0, factor=1e10, jitter="none", window=0.001)
    p = RestartPolicy(cfg)
    now = 0.0
    for _ in range(500):
        now, r = run_and_die(p, now, 0.0)
    assert r.delay == 60.0


def test_config_decodes_and_validates() -> None:
    cfg = msgspec.toml.decode(b'jitter = "decorrelated"\nmax_restarts = 3\n', type=BackoffConfig)
    assert cfg.jitter == "decorrelated" and cfg.max_restarts == 3
    with pytest.raises(msgspec.ValidationError):
        msgspec.toml.decode(b'jitter = "sometimes"\n', type=BackoffConfig)
    with pytest.raises(msgspec.ValidationError):
        msgspec.toml.decode(b"max_restarts = 0\n", type=BackoffConfig)
    for bad in (
        {"base": 0.0},
        {"base": 5.0, "cap": 1.0},
        {"factor": 0.9},
        {"window": 0.0},
        {"stable_after": -1.0},
    ):
        with pytest.raises(ValueError):
            BackoffConfig(**bad)  # type: ignore[arg-type]


def test_a_policy_that_does_not_loop_keeps_growing_its_delays() -> None:
    p = RestartPolicy(NO_JITTER, loops=False)
    now, delays = 0.0, []
    for _ in range(8):
        now, r = run_and_die(p, now, 0.1)
        assert not p.in_crash_loop and not r.entered_crash_loop
        delays.append(r.delay)
    # Past max_restarts deaths within the window, the delays still double to the cap.
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0]
    assert not p.in_crash_loop and state(p) == "backoff"


def test_a_lower_max_restarts_counts_the_deaths_already_seen() -> None:
    p = RestartPolicy(msgspec.structs.replace(NO_JITTER, max_restarts=50))
    now = 0.0
    for _ in range(3):
        now, _ = run_and_die(p, now, 0.1)
    assert not p.in_crash_loop
    p.reconfigure(msgspec.structs.replace(NO_JITTER, max_restarts=2))
    _, r = run_and_die(p, now, 0.1)
    assert r.entered_crash_loop and state(p) == "crash_loop"
    assert r.delay == NO_JITTER.cap


def test_new_delays_start_where_the_old_ones_had_grown_to_within_the_new_cap() -> None:
    p = RestartPolicy(NO_JITTER)
    now = 0.0
    delays = []
    for _ in range(3):
        now, r = run_and_die(p, now, 0.1)
        delays.append(r.delay)
    assert delays == [0.5, 1.0, 2.0]
    p.reconfigure(msgspec.structs.replace(NO_JITTER, base=0.1, cap=3.0, max_restarts=50))
    _, r = run_and_die(p, now, 0.1)
    assert r.delay == 3.0
    p.reconfigure(msgspec.structs.replace(NO_JITTER, base=10.0, cap=20.0, max_restarts=50))
    _, r = run_and_die(p, now + 10, 0.1)
    assert r.delay == 10.0
