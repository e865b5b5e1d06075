"""Backoff, crash loops and circuit breaking on trio's MockClock: no real sleeps.

The runner talks to an in-memory server whose behaviour each test scripts, so the
clock can jump to every deadline the runner sets.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import msgspec
import pytest
import trio
import trio.lowlevel
import trio.testing

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Config
from mcpd.config.tables.servertable import ServerConfig
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.calling.calls import CallRefused
from mcpd.servers.life.runner import Runner
from mcpd.servers.life.server_parts import ServerParts
from mcpd.servers.status.outage import iso_of_monotonic
from mcpd.servers.status.status_of import status_of
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.messages import Notification
from protocol.jsonrpc.splice import SplicedCall
from protocol.mcp import core as mcp
from tests.support.parts.calls import at_runner
from transports.base import ReplySink, Transport
from transports.errors import SpawnError, TransportError, Unreachable, single_exceptions
from transports.sends import Sends


class FakeServer:
    def __init__(self) -> None:
        self.starts: list[float] = []
        self.fail_starts = 0
        self.call_mode = "ok"  # ok | hang | broken
        self.probe_mode = "ok"  # ok | hang | broken | gone
        self.calls_seen = 0
        self.probes_seen = 0
        self.started = trio.Event()
        self.probed = trio.Event()
        self.lists_seen = 0
        self.ttl_ms = 0
        self.notify: Any = None

    @contextlib.asynccontextmanager
    async def open(
        self, alias: str, cfg: ServerConfig, config: Config, on_notification: Any, auth: Any
    ) -> AsyncIterator[FakeTransport]:
        self.starts.append(trio.current_time())
        self.started.set()
        if len(self.starts) <= self.fail_starts:
            raise SpawnError(f"{alias}: cannot start: attempt {len(self.starts)} refused")
        self.notify = on_notification
        transport = FakeTransport(self, alias)
        # What ends the session reaches the runner as it is, as from a real transport.
        with single_exceptions():
            async with trio.open_nursery() as nursery:
                transport.sends.nursery = nursery
                yield transport
                nursery.cancel_scope.cancel()


class FakeTransport(Transport):
    def __init__(self, server: FakeServer, alias: str) -> None:
        super().__init__(alias)
        self.server = server
        self.auth = None
        self.sends = Sends(alias, self._await)

    @property
    def pid(self) -> None:
        return None

    @property
    def started(self) -> None:
        return None

    def stderr_tail(self) -> list[str]:
        return []

    async def listen(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()

    def reset_session(self) -> None:
        pass

    def send(
        self,
        method: str,
        params: Any,
        reply: ReplySink,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> rpc.Id:
        return self.sends.send(method, params, reply, headers)

    def forget(self, rid: rpc.Id, reason: str) -> None:
        self.sends.forget(rid)

    async def _await(self, method: str, params: Any, headers: Mapping[str, str] | None) -> Any:
        return await self.request(method, params, headers=headers)

    async def notify(
        self, method: str, params: Any, *, headers: Mapping[str, str] | None = None
    ) -> None:
        pass

    async def request(
        self,
        method: str,
        params: Any,
        *,
        headers: Mapping[str, str] | None = None,
        cancellable: bool = True,
    ) -> msgspec.Raw:
        s = self.server
        if method == "server/discover":
            if (
                s.starts
                and len(s.starts) > 0
                and s.probes_seen is not None
                and getattr(self, "connected", False)
            ):
                s.probes_seen += 1
                s.probed.set()
                await self._behave(s.probe_mode)
            self.connected = True
            return _raw(
                {
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {}},
                    "resultType": "complete",
                    "ttlMs": 0,
                    "cacheScope": "private",
                }
            )
        if method == "tools/list":
            s.lists_seen += 1
            return _raw(
                {
                    "tools": [{"name": "work", "inputSchema": {"type": "object"}}],
                    "resultType": "complete",
                    "ttlMs": s.ttl_ms,
                }
            )
        if method == "tools/call":
            s.calls_seen += 1
            if s.call_mode == "progress":
                # 30 s of work, reporting every 5 s: longer than the 10 s call timeout.
                spliced = isinstance(params, SplicedCall)
                token = params.token if spliced else params.meta["progressToken"]
                for i in range(6):
                    await trio.sleep(5)
                    s.notify(
                        Notification(
                            "notifications/progress",
                            msgspec.Raw(
                                json.dumps({"progressToken": token, "progress": i + 1}).encode()
                            ),
                        )
                    )
                return _raw({"content": [{"type": "text", "text": "done"}]})
            await self._behave(s.call_mode)
            return _raw({"content": [{"type": "text", "text": "done"}], "resultType": "complete"})
        raise AssertionError(method)

    async def _behave(self, mode: str) -> None:
        if mode == "hang":
            await trio.sleep_forever()
        if mode == "slow":
            await trio.sleep(10)
        if mode == "broken":
            raise TransportError(f"{self.alias}: connection reset by peer")
        if mode == "gone":
            raise Unreachable(f"{self.alias}: connection refused")


def _raw(obj: Any) -> msgspec.Raw:
    return msgspec.Raw(json.dumps(obj).encode())


def make(fake: FakeServer, **daemon: Any) -> Runner:
    base = {
        "backoff_base": 1.0,
        "backoff_cap": 60.0,
        "max_restarts": 5,
        "crash_window": 60.0,
        "stable_after": 30.0,
        "failure_threshold": 3,
        "cooldown_base": 5.0,
        "cooldown_cap": 40.0,
        "call_timeout": 10.0,
        "probe_timeout": 2.0,
    }
    base.update(daemon)
    config = parse_config({"daemon": base, "servers": {"s": {"command": "fake"}}})
    parts = ServerParts("s", config.servers["s"], config, Catalog(config.naming), lambda a: None)
    return Runner(parts, fake.open)


def call_params() -> mcp.CallToolParams:
    return mcp.CallToolParams(name="work", arguments=msgspec.Raw(b"{}"))


async def wait_for_starts(fake: FakeServer, n: int) -> None:
    while len(fake.starts) < n:
        fake.started = trio.Event()
        await fake.started.wait()


async def test_backoff_grows_then_crash_loop_retries_at_the_cap(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer()
    fake.fail_starts = 1000
    runner = make(fake)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(runner.run)
        await wait_for_starts(fake, 9)
        # Retried as a crash loop is, though a command that never started is "failed".
        assert runner.parts.policy.in_crash_loop and runner.parts.state == "failed"
        nursery.cancel_scope.cancel()
    gaps = [b - a for a, b in zip(fake.starts, fake.starts[1:], strict=False)]
    # Full jitter: each delay is at most base * 2^n, and never beyond the cap.
    for n, gap in enumerate(gaps[:4]):
        assert 0 <= gap <= 1.0 * 2**n + 1e-9
    # The fifth death inside the 60 s window is a crash loop: from then on, the cap.
    assert gaps[4:] == pytest.approx([60.0] * len(gaps[4:]))
    assert (
        runner.parts.downtime.last_error is not None
        and "refused" in runner.parts.downtime.last_error
    )


async def test_recovery_after_failed_starts_and_counter_reset_when_stable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer()
    fake.fail_starts = 3
    runner = make(fake)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(runner.run)
        await wait_for_starts(fake, 4)
        while runner.parts.state != "ready":
            await trio.sleep(0.5)
        assert runner.parts.policy.failures == 3
        await trio.sleep(31)  # stable_after
        assert runner.parts.policy.failures == 0
        assert runner.parts.state == "ready"
        nursery.cancel_scope.cancel()


async def test_breaker_opens_after_the_threshold_and_fails_fast(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer()
    runner = make(fake)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(runner.run)
        await runner.parts.first_attempt.wait()
        fake.call_mode = "broken"
        fake.probe_mode = "broken"
        for _ in range(3):
            with pytest.raises(CallRefused):
                await at_runner(runner.parts, call_params())
        assert runner.parts.state == "open"
        opened_at = trio.current_time()
        with pytest.raises(CallRefused) as info:
            await at_runner(runner.parts, call_params())
        outage = info.value.outage
        assert outage.state == "open"
        assert outage.retry_at == pytest.approx(opened_at + 5.0)
        assert "connection reset" in outage.reason
        assert fake.calls_seen == 3, "a call reached the server while the breaker was open"
        # What `mcpd status` shows: why it opened, and since when.
        row = status_of(runner.parts)
        assert row.state == "open" and "connection reset" in (row.last_error or "")
        assert row.since == iso_of_monotonic(opened_at)
        # The cooldown passes: one probe, which cannot reach the server (gone, not
        # failing): the session ends, and the server is started again on the backoff's
        # delay (a second), not the cooldown's.
        fake.probe_mode = "gone"
        await fake.probed.wait()
        fake.probed = trio.Event()
        await wait_for_starts(fake, 2)
        assert 5.0 < fake.starts[1] - opened_at < 5.0 + 2.0
        await trio.sleep(0.1)
        # It connects and lists: there, but its calls unproven. Closed on trial, so
        # the next call goes, and fails: open again at once, for longer each time.
        assert runner.parts.state == "degraded"
        with pytest.raises(CallRefused):
            await at_runner(runner.parts, call_params())
        assert runner.parts.state == "open" and fake.calls_seen == 4
        st = runner.parts.breaker.status(trio.current_time())
        assert st.retry_at == pytest.approx(trio.current_time() + 20.0)
        assert st.since == pytest.approx(opened_at)  # the same outage all along
        # The next probe is answered and calls work: the first call is the trial,
        # and its success ends the outage.
        fake.probe_mode = "ok"
        fake.call_mode = "ok"
        await fake.probed.wait()
        await trio.sleep(0.1)
        assert runner.parts.state == "degraded"
        raw = await at_runner(runner.parts, call_params())
        assert b"done" in bytes(raw)
        assert runner.parts.state == "ready"
        assert runner.parts.breaker.status(trio.current_time()).since is None
        nursery.cancel_scope.cancel()


async def test_half_open_lets_one_probe_through_and_refuses_concurrent_callers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer()
    runner = make(fake)
    refused: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(runner.run)
        await runner.parts.first_attempt.wait()
        fake.call_mode = "broken"
        for _ in range(3):
            with pytest.raises(CallRefused):
                await at_runner(runner.parts, call_params())
        fake.probe_mode = "slow"  # the probe takes a while: callers arrive meanwhile
        await fake.probed.wait()
        assert runner.parts.state == "half_open"
        seen_before = fake.calls_seen

        async def caller() -> None:
            try:
                await at_runner(runner.parts, call_params())
            except CallRefused as exc:
                refused.append(exc.outage.state)

        async with trio.open_nursery() as callers:
            for _ in range(10):
                callers.start_soon(caller)
        assert refused == ["half_open"] * 10
        assert fake.calls_seen == seen_before
        assert fake.probes_seen == 1
        nursery.cancel_scope.cancel()


async def test_a_hung_call_times_out_and_a_silent_server_is_restarted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer()
    runner = make(fake)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(runner.run)
        await runner.parts.first_attempt.wait()
        fake.call_mode = "hang"
        fake.probe_mode = "hang"
        start = trio.current_time()
        with pytest.raises(CallRefused) as info:
            await at_runner(runner.parts, call_params())
        assert info.value.outage.state == "timeout"
        assert trio.current_time() - start == pytest.approx(10.0)
        await wait_for_starts(fake, 2)  # the liveness probe got no answer: restarted
        nursery.cancel_scope.cancel()


async def test_concurrency_limit_and_bounded_queue(autojump_clock: trio.testing.MockClock) -> None:
    fake = FakeServer()
    runner = make(fake, queue_size=3, queue_timeout=5.0)
    runner.parts.scheduler.limit = 2
    outcomes: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(runner.run)
        await runner.parts.first_attempt.wait()
        fake.call_mode = "slow"  # 10 s per call

        async def caller() -> None:
            try:
                await at_runner(runner.parts, call_params(), call_timeout=30)
                outcomes.append("ok")
            except CallRefused as exc:
                outcomes.append(exc.outage.reason)

        async with trio.open_nursery() as callers:
            for _ in range(6):
                callers.start_soon(caller)
                await trio.lowlevel.checkpoint()
        assert outcomes.count("ok") == 2
        busy = [o for o in outcomes if o != "ok"]
        # One refused at once (queue full), three gave up after queue_timeout.
        assert sum("already waiting" in o for o in busy) == 1
        assert sum("no free slot within 5 s" in o for o in busy) == 3
        nursery.cancel_scope.cancel()


async def test_outage_is_visible_in_the_registry(autojump_clock: trio.testing.MockClock) -> None:
    fake = FakeServer()
    runner = make(fake)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(runner.run)
        await runner.parts.first_attempt.wait()
        entry = runner.parts.registry.lookup("mcp__s__work")
        assert entry is not None and entry.available
        fake.call_mode = "broken"
        fake.probe_mode = "broken"
        for _ in range(3):
            with pytest.raises(CallRefused):
                await at_runner(runner.parts, call_params())
        tool = json.loads(rpc.encode(runner.parts.registry.listing()[0]))
        assert tool["_meta"]["mcpd/available"] is False
        assert tool["description"].startswith("[unavailable: s is failing (circuit open) since ")
        nursery.cancel_scope.cancel()


async def test_progress_extends_a_call_up_to_the_hard_limit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer()
    runner = make(fake, max_call_time=60.0)
    seen: list[Any] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(runner.run)
        await runner.parts.first_attempt.wait()
        fake.call_mode = "progress"
        params = call_params()
        params.meta = {"progressToken": "mine"}
        raw = await at_runner(runner.parts, params, on_progress=seen.append)
        assert b"done" in bytes(raw)
        assert [p.progress for p in seen] == [1, 2, 3, 4, 5, 6]
        assert {p.progressToken for p in seen} == {"mine"}
        # Without progress the same 30 s of work is cut at the 10 s call timeout...
        fake.call_mode = "slow"
        start = trio.current_time()
        with pytest.raises(CallRefused):
            await at_runner(runner.parts, call_params(), call_timeout=5)
        assert trio.current_time() - start == pytest.approx(5)
        # ...and progress cannot stretch a call past max_call_time.
        runner.parts.config = make(fake, max_call_time=12.0).parts.config
        fake.call_mode = "progress"
        params = call_params()
        params.meta = {"progressToken": "again"}
        start = trio.current_time()
        with pytest.raises(CallRefused):
            await at_runner(runner.parts, params, on_progress=seen.append)
        assert trio.current_time() - start == pytest.approx(12)
        nursery.cancel_scope.cancel()


async def test_tool_lists_are_refetched_only_when_their_ttl_ran_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer()
    fake.ttl_ms = 60_000
    runner = make(fake)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(runner.run)
        await runner.parts.first_attempt.wait()
        assert fake.lists_seen == 1
        for _ in range(5):  # agents listing tools while the list is fresh
            runner.parts.tool_list.maybe_refresh()
            await trio.sleep(10)
        assert fake.lists_seen == 1
        await trio.sleep(15)  # 65 s after the listing: stale
        runner.parts.tool_list.maybe_refresh()
        await trio.sleep(0.1)
        assert fake.lists_seen == 2
        # A notification refetches, fresh or not: a second after the last fetch at
        # the soonest, so a server announcing changes in a loop costs one a second.
        runner.parts.tool_list.request()
        await trio.sleep(1.1)
        assert fake.lists_seen == 3
        # A ttl of 0 is no cache: the next listing after the short floor refetches.
        fake.ttl_ms = 0
        runner.parts.tool_list.request()
        await trio.sleep(0.1)
        await trio.sleep(2)
        runner.parts.tool_list.maybe_refresh()
        await trio.sleep(0.1)
        assert fake.lists_seen == 5
        nursery.cancel_scope.cancel()


async def test_a_server_that_says_retry_after_is_not_asked_sooner(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeServer()
    runner = make(fake, backoff_base=0.1, backoff_cap=1.0)
    busy = TransportError("s: 503 Service Unavailable", retry_after=30.0)

    @contextlib.asynccontextmanager
    async def overloaded(*args: Any) -> AsyncIterator[FakeTransport]:
        fake.starts.append(trio.current_time())
        fake.started.set()
        if len(fake.starts) == 1:
            raise busy
        yield FakeTransport(fake, "s")

    runner._open_transport = overloaded
    async with trio.open_nursery() as nursery:
        nursery.start_soon(runner.run)
        await wait_for_starts(fake, 2)
        # The backoff alone would have retried within a second.
        assert fake.starts[1] - fake.starts[0] == pytest.approx(30.0, abs=0.01)
        nursery.cancel_scope.cancel()
