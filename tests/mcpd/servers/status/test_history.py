"""Each server's recent history for the status page: state changes of the last day and
calls per minute over the last hour, in rings of fixed size, kept across restarts."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import trio

from mcpd.local.state.statefile import SavedHistory, read_state
from mcpd.servers.status.history import CHANGES, MINUTES, NOT_RUNNING, SAVE_EVERY, Histories
from mcpd.servers.status.outage import Outage
from mcpd.servers.status.stats import LatencyStats
from tests.support.clients.agent import make_config, running

T0 = 1_800_000_000.0  # a minute boundary


class Server:
    """What the histories read of a runner."""

    def __init__(self, state: str = "ready", reason: str = "") -> None:
        self.stats = LatencyStats()
        self.state = state
        self.reason = reason

    @property
    def available(self) -> bool:
        return self.state in ("ready", "degraded")

    def outage(self) -> Outage:
        return Outage("s", self.state, self.reason)


def test_a_change_is_noted_once_with_its_reason_and_time() -> None:
    h, s = Histories(), Server()
    h.note("s", s, at=T0)
    h.note("s", s, at=T0 + 1)  # no change: nothing new
    s.state, s.reason = "crash_loop", "exited with status 1"
    h.note("s", s, at=T0 + 2)
    s.reason = "exited with status 2"
    h.note("s", s, at=T0 + 3)  # the same state: the outage goes on
    s.state = "ready"
    h.note("s", s, at=T0 + 4)
    [view] = h.view({"s": s}, now=T0 + 5)
    assert [(c.at, c.state, c.reason) for c in view.changes] == [
        (T0, "ready", None),
        (T0 + 2, "crash_loop", "exited with status 1"),
        (T0 + 4, "ready", None),
    ]


def test_a_flapping_server_keeps_a_ring_of_its_latest_changes() -> None:
    h, s = Histories(), Server()
    for i in range(CHANGES + 50):
        s.state = "ready" if i % 2 else "open"
        h.note("s", s, at=T0 + i)
    [view] = h.view({"s": s}, now=T0 + 1000)
    assert len(view.changes) == CHANGES
    assert view.changes[-1].at == T0 + CHANGES + 49
    assert view.clipped  # the page says the day's start is not known


def test_the_day_keeps_the_change_in_force_at_its_start() -> None:
    h, s = Histories(), Server()
    h.note("s", s, at=T0)
    s.state = "failed"
    h.note("s", s, at=T0 + 100)
    s.state = "ready"
    h.note("s", s, at=T0 + 90_000)
    [view] = h.view({"s": s}, now=T0 + 100_000)
    # Down from T0+100 on: that one covers the start of the day, the first is gone.
    assert [c.state for c in view.changes] == ["failed", "ready"]
    assert not view.clipped


def test_a_minute_is_cut_from_the_calls_with_its_percentiles() -> None:
    h, s = Histories(), Server()
    for ms in range(1, 101):  # 1 ms .. 100 ms
        s.stats.record(ms / 1000, error=ms > 97)
    h.roll(int(T0), {"s": s})
    h.roll(int(T0) + 60, {"s": s})  # a quiet minute: nothing is kept for it
    s.stats.record(0.5)
    [view] = h.view({"s": s}, now=T0 + 130)
    first, current = view.minutes
    assert (first.at, first.calls, first.errors) == (T0, 100, 3)
    assert (first.p50_ms, first.p95_ms) == (50.0, 95.0)
    # The minute under way, so far: only the call made in it.
    assert (current.at, current.calls, current.p50_ms) == (T0 + 120, 1, 500.0)


def test_a_minute_of_more_calls_than_the_latency_ring_holds_counts_them_all() -> None:
    h, s = Histories(), Server()
    s.stats = LatencyStats(window=8)
    for _ in range(20):
        s.stats.record(0.001)
    for _ in range(8):
        s.stats.record(0.009)
    h.roll(int(T0), {"s": s})
    [minute] = h.view({"s": s}, now=T0 + 61)[0].minutes
    assert minute.calls == 28
    assert minute.p50_ms == 9.0  # from the latest calls the ring still held


def test_a_restarted_runner_counts_from_zero() -> None:
    h, s = Histories(), Server()
    for _ in range(5):
        s.stats.record(0.01)
    h.roll(int(T0), {"s": s})
    s.stats = LatencyStats()  # a reload started the server again
    s.stats.record(0.02)
    h.roll(int(T0) + 60, {"s": s})
    minutes = h.view({"s": s}, now=T0 + 121)[0].minutes
    assert [(m.calls, m.p50_ms) for m in minutes] == [(5, 10.0), (1, 20.0)]


def test_the_minutes_are_a_ring_of_the_last_hour() -> None:
    h, s = Histories(), Server()
    for i in range(MINUTES + 30):
        s.stats.record(0.001)
        h.roll(int(T0) + 60 * i, {"s": s})
    held = h.saved()["s"].minutes
    assert len(held) == MINUTES
    now = T0 + 60 * (MINUTES + 30)
    shown = h.view({"s": s}, now=now)[0].minutes
    assert all(m.at > now - 3600 for m in shown) and len(shown) == 59


def test_a_saved_history_comes_back_with_the_time_mcpd_was_away() -> None:
    h, s = Histories(), Server()
    h.note("s", s, at=T0)
    s.state = "failed"
    h.note("s", s, at=T0 + 10)
    s.stats.record(0.003)
    h.roll(int(T0), {"s": s})
    saved = msgspec.json.decode(msgspec.json.encode(h.saved()), type=dict[str, SavedHistory])
    assert saved["s"].until == T0 + 60

    again = Histories()
    again.load(saved, ["s", "other"])
    fresh = Server("starting")
    again.note("s", fresh, at=T0 + 500)
    [view] = again.view({"s": fresh}, now=T0 + 501)
    assert [(c.at, c.state, c.reason) for c in view.changes] == [
        (T0, "ready", None),
        (T0 + 10, "failed", ""),
        (T0 + 60, "stopped", NOT_RUNNING),
        (T0 + 500, "starting", ""),
    ]
    assert [m.calls for m in view.minutes] == [1]
    assert again.view({"other": Server()}, now=T0)[0].changes == []  # nothing was saved of it


async def test_a_servers_history_outlives_a_daemon_restart(tmp_path: Path) -> None:
    crash = [sys.executable, "-c", "import sys; sys.stderr.write('no API key\\n'); sys.exit(3)"]
    config = make_config(
        tmp_path,
        {"broken": {"command": crash[0], "args": crash[1:]}},
        state_dir=str(tmp_path / "state"),
        startup_deadline=5.0,
        backoff_base=30.0,
        backoff_cap=30.0,
    )
    with trio.fail_after(30):
        async with running(config) as daemon:
            [first] = daemon.history()
            states = [c.state for c in first.changes]
            assert states[0] == "starting" and states[-1] == "failed"
            failed_at = first.changes[-1].at
            assert "status 3" in (first.changes[-1].reason or "")
        saved = read_state(str(tmp_path / "state" / "registry.json")).history["broken"]
        assert saved.changes[-1].state in ("failed", "stopped")
        async with running(config) as daemon:
            [again] = daemon.history()
    kept = [(c.state, c.at) for c in again.changes]
    assert ("failed", failed_at) in kept
    # Between the two runs: mcpd was not running, and the page says so.
    gap = again.changes[kept.index(("failed", failed_at)) + 1]
    assert gap.state == "stopped"
    assert again.changes[-1].state == "failed"


def test_only_minutes_with_calls_ask_for_the_state_file_to_be_written() -> None:
    saves: list[int] = []
    h, s = Histories(lambda: saves.append(1)), Server()
    for i in range(2 * SAVE_EVERY):  # a quiet while: the file has nothing new to keep
        h.roll(int(T0) + 60 * i, {"s": s})
    assert saves == []
    s.stats.record(0.01)
    for i in range(2 * SAVE_EVERY, 4 * SAVE_EVERY):
        h.roll(int(T0) + 60 * i, {"s": s})
    assert saves == [1]  # once for the minute with calls, not at every save point after
