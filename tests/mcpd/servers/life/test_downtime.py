"""A server's phase and downtime: since when it is down and why, when it is tried
again (never sooner than it asked, and a time it names that no clock can show does
not stop the daemon), and what waits for a login or a fixed config instead."""

from __future__ import annotations

import logging
import math

import pytest
import trio
import trio.testing

from mcpd.servers.life.backoff import BackoffConfig, RestartPolicy
from mcpd.servers.life.downtime import Downtime
from mcpd.servers.life.events import Failure, LifecycleJournal
from mcpd.servers.status.outage import Outage, clock_time

BACKOFF = BackoffConfig(base=1.0, cap=8.0, jitter="none", max_restarts=5, window=60.0)


class Down:
    def __init__(self, *, process: bool = False, login: bool = False) -> None:
        self.published = 0
        self.login = trio.Event()
        self.downtime = Downtime(
            LifecycleJournal("srv", lambda: []),
            RestartPolicy(BACKOFF, loops=process),
            self._publish,
            process=process,
            login_changed=self._login_changed if login else None,
        )

    def _publish(self) -> None:
        self.published += 1

    async def _login_changed(self) -> None:
        await self.login.wait()


def outage(reason: str = "HTTP 503", retry_after: float | None = None) -> Failure:
    return Failure("outage", reason, reason, retry_after)


async def test_a_phase_change_is_published_and_wakes_whoever_waits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    d = Down()
    started = d.downtime.since
    woken = []

    async def waiter() -> None:
        await d.downtime.phase_changed()
        woken.append(d.downtime.phase)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(5)
        d.downtime.set_phase("starting")  # no change: published, nobody woken
        assert d.published == 1 and woken == [] and d.downtime.since == started
        d.downtime.set_phase("ready")
    assert woken == ["ready"] and d.downtime.since == started + 5


async def test_down_since_is_the_first_failure_and_back_up_ends_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    d = Down()
    first = trio.current_time()
    d.downtime.failed(outage(), unreachable=True)
    assert d.downtime.phase == "waiting" and d.downtime.unreachable
    assert d.downtime.retry_at == first + 1.0
    await trio.sleep(3)
    d.downtime.failed(outage("timed out"), unreachable=False)
    assert d.downtime.down_since == first
    assert d.downtime.last_error == "timed out" and not d.downtime.unreachable
    assert d.downtime.retry_at == first + 3 + 2.0  # the backoff grew
    assert d.downtime.back_up() is True
    assert d.downtime.down_since is None and d.downtime.last_error is None
    assert d.downtime.back_up() is False


async def test_a_child_that_cannot_be_spawned_is_marked_not_started() -> None:
    d = Down(process=True)
    d.downtime.failed(Failure("spawn_failed", "no such file", "no such file"), unreachable=False)
    assert d.downtime.not_started
    d.downtime.failed(outage("exited"), unreachable=False)
    assert not d.downtime.not_started


async def test_a_server_is_not_asked_sooner_than_its_retry_after() -> None:
    d = Down()
    now = trio.current_time()
    d.downtime.failed(outage(retry_after=120.0), unreachable=False)
    assert d.downtime.retry_at == pytest.approx(now + 120.0)
    d.downtime.failed(outage(retry_after=0.5), unreachable=False)  # sooner than backoff
    assert d.downtime.retry_at == pytest.approx(now + 2.0)


@pytest.mark.parametrize("retry_after", [1e12, math.inf, 1e300])
async def test_a_retry_after_beyond_any_clock_does_not_stop_the_daemon(
    retry_after: float, caplog: pytest.LogCaptureFixture
) -> None:
    # "Retry-After: 1000000000000" from a server: its failure must be recorded and
    # shown like any other, and the server tried again some day.
    d = Down()
    with caplog.at_level(logging.WARNING, logger="mcpd.server"):
        d.downtime.failed(outage(retry_after=retry_after), unreachable=False)
    retry_at = d.downtime.retry_at
    assert retry_at is not None and math.isfinite(retry_at)
    assert retry_at >= trio.current_time() + 3600  # still not asked soon
    assert d.downtime.phase == "waiting"
    shown = Outage("srv", "failed", "HTTP 503", d.downtime.down_since, retry_at)
    assert shown.meta()["retry_at"] is not None
    assert "mcpd will retry at" in shown.sentence()
    assert clock_time(retry_at) in caplog.text


async def test_a_wait_for_a_login_has_no_retry_time_and_is_logged_once_per_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    d = Down(login=True)
    d.downtime.failed(outage(), unreachable=False)
    with caplog.at_level(logging.WARNING, logger="mcpd.server"):
        d.downtime.login_needed("the server asks for a login")
        d.downtime.login_needed("the server asks for a login")
        d.downtime.login_needed("the server asks for more permissions")
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("needs")]
    assert lines == [
        "needs a login: the server asks for a login",
        "needs a login: the server asks for more permissions",
    ]
    assert d.downtime.phase == "needs_login" and d.downtime.retry_at is None


async def test_waiting_for_a_login_ends_with_the_login_not_with_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    d = Down(login=True)
    d.downtime.login_needed("the server asks for a login")
    with trio.move_on_after(3600) as waited:
        await d.downtime.until_retry()
    assert waited.cancelled_caught
    async with trio.open_nursery() as nursery:
        nursery.start_soon(d.downtime.until_retry)
        await trio.testing.wait_all_tasks_blocked()
        d.login.set()


async def test_a_login_during_backoff_is_tried_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    d = Down(login=True)
    d.downtime.failed(outage(retry_after=600.0), unreachable=False)
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(d.downtime.until_retry)
        await trio.sleep(10)
        d.login.set()
    assert trio.current_time() == start + 10
    assert d.downtime.retry_at is None


async def test_without_a_login_the_wait_is_the_backoffs(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    d = Down(process=True)
    d.downtime.failed(outage("exited"), unreachable=False)
    start = trio.current_time()
    with caplog.at_level(logging.INFO, logger="mcpd.server"):
        await d.downtime.until_retry()
    assert trio.current_time() == start + 1.0
    assert "restarting" in [r.getMessage() for r in caplog.records]


async def test_a_config_that_cannot_be_expanded_is_never_retried(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    d = Down()
    with caplog.at_level(logging.ERROR, logger="mcpd.server"):
        d.downtime.cannot_start("${API_KEY} is not set")
    assert d.downtime.phase == "unresolved" and d.downtime.retry_at is None
    assert [r.getMessage() for r in caplog.records] == ["cannot start: ${API_KEY} is not set"]
    with trio.move_on_after(10**6) as waited:
        await d.downtime.until_retry()
    assert waited.cancelled_caught
