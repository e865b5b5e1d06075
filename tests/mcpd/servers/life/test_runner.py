"""One server's runner against a transport factory that plays the server's part: a
server whose config cannot be expanded is never started, a start that fails is
retried and its calls told at once, what a failing server says (its error, its
stderr) is stored with mcpd's secrets masked, a bug in handling one server does not
take the daemon down, and a sandbox that could not be applied is shown."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any, cast

import msgspec
import pytest
import trio
import trio.testing

from mcpd.config.credentials.secrets import HeldSecret
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Config
from mcpd.config.tables.servertable import ServerConfig
from mcpd.policy.redaction.guard import SecretGuard
from mcpd.policy.redaction.masking import KnownSecrets
from mcpd.registry.tables.catalog import Catalog
from mcpd.server_row import SandboxStatus
from mcpd.servers.calling.calls import CallRefused
from mcpd.servers.life.runner import Runner
from mcpd.servers.life.server_parts import ServerParts
from mcpd.servers.status.status_of import status_of
from protocol.mcp import core as mcp
from tests.support.parts.calls import a_call
from tests.support.parts.stand_in import StandIn
from transports.base import AuthHook, NotificationHandler, Started, Transport
from transports.errors import TransportClosed

SECRET = "tok-0123456789abcdef"


class Played(StandIn):
    """A legacy server with one tool, ``t``; ``die`` ends its session as a transport
    whose server went away does."""

    def __init__(self, stderr: list[str], started: Started | None) -> None:
        super().__init__()
        self.started = started
        self.pid = started.pid if started is not None else None
        self.fail_with: Exception | None = None
        self._stderr = stderr

    def answer(self, method: str, params: Any) -> Any:
        if self.fail_with is not None:
            return self.fail_with
        if method == "initialize":
            return {"protocolVersion": mcp.LATEST_LEGACY, "capabilities": {"tools": {}}}
        if method == "tools/list":
            return {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
        return super().answer(method, params)

    def stderr_tail(self) -> list[str]:
        return list(self._stderr)

    def die(self, reason: str) -> None:
        self.error = TransportClosed(reason)
        self.closed.set()


class Factory:
    """Opens a ``Played`` server, or fails as ``next`` says: ``refuse`` (an error
    raised while opening), ``fail`` (opened, then its first request fails with
    ``failure``), ``serve``."""

    def __init__(self) -> None:
        self.next = "serve"
        self.failure: Exception = TransportClosed("connection refused")
        self.stderr: list[str] = []
        self.started: Started | None = None
        self.opened = 0
        self.current: Played | None = None
        self.changed = trio.Event()

    @contextlib.asynccontextmanager
    async def __call__(
        self,
        alias: str,
        cfg: ServerConfig,
        config: Config,
        on: NotificationHandler,
        auth: AuthHook | None,
    ) -> AsyncIterator[Transport]:
        self.opened += 1
        self.changed.set()
        self.changed = trio.Event()
        if self.next == "refuse":
            raise self.failure
        played = self.current = Played(self.stderr, self.started)
        if self.next == "fail":
            played.fail_with = self.failure
        yield cast(Transport, played)

    async def wait_opened(self, count: int) -> None:
        while self.opened < count:
            await self.changed.wait()


def config(server: dict[str, Any], **daemon: Any) -> Config:
    return parse_config({"daemon": daemon, "servers": {"s": server}}, env={"HOME": "/nonexistent"})


def guard() -> SecretGuard:
    known = KnownSecrets()
    known.replace("config", [HeldSecret("servers.s.env.TOKEN", SECRET)])
    return SecretGuard(known)


def runner(cfg: Config, factory: Factory, guard: SecretGuard | None = None) -> Runner:
    parts = ServerParts(
        "s", cfg.servers["s"], cfg, Catalog(cfg.naming), lambda a: None, guard=guard
    )
    return Runner(parts, factory)


async def until(r: Runner, state: str) -> None:
    while r.parts.state != state:
        await r.parts.phase_changed()


async def test_a_server_whose_config_cannot_be_expanded_is_never_started(
    autojump_clock: trio.testing.MockClock,
) -> None:
    factory = Factory()
    cfg = config({"command": "srv", "env": {"TOKEN": "${NOT_SET_ANYWHERE}"}})
    r = runner(cfg, factory)
    assert r.parts.cfg.unresolved is not None
    call, outcomes = a_call("t", timeout=1000)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(r.run)
        r.parts.scheduler.start(call)
        await r.parts.first_attempt.wait()
        with pytest.raises(CallRefused) as refused:
            await outcomes.result(call)
        await trio.sleep(3600)  # an hour on: not tried again
        assert factory.opened == 0 and r.parts.state == "unresolved"
        assert r.parts.outage().reason is not None and "NOT_SET_ANYWHERE" in r.parts.outage().reason
        nursery.cancel_scope.cancel()
    assert "NOT_SET_ANYWHERE" in refused.value.outage.sentence()


async def test_a_call_waiting_for_a_first_start_that_fails_is_told_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    factory = Factory()
    factory.next = "refuse"
    r = runner(config({"command": "srv"}, call_timeout=60), factory)
    call, outcomes = a_call("t", timeout=60)
    async with trio.open_nursery() as nursery:
        r.parts.scheduler.start(call)  # before the runner starts: it waits for the first start
        start = trio.current_time()
        nursery.start_soon(r.run)
        with pytest.raises(CallRefused) as refused:
            await outcomes.result(call)
        assert trio.current_time() == start  # not after the call's own timeout
        nursery.cancel_scope.cancel()
    assert "connection refused" in refused.value.outage.sentence()


async def test_a_start_that_fails_is_tried_again_and_then_serves(
    autojump_clock: trio.testing.MockClock,
) -> None:
    factory = Factory()
    factory.next = "refuse"
    r = runner(config({"command": "srv"}), factory)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(r.run)
        await factory.wait_opened(2)
        assert r.parts.attempts == 2 and not r.parts.available
        factory.next = "serve"
        await until(r, "ready")
        assert [e.original for e in r.parts.registry.listing()] == ["t"]
        assert r.parts.upstream is not None and r.parts.upstream.era == "legacy"
        nursery.cancel_scope.cancel()
    # A runner stopped leaves nothing behind that looks alive.
    assert r.parts.phase == "stopped" and r.parts.upstream is None and r.parts.process is None


async def test_what_a_failing_server_says_is_stored_with_mcpds_secrets_masked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    factory = Factory()
    factory.next = "fail"
    factory.failure = TransportClosed(f"closed: bad token {SECRET}")
    factory.stderr = [f"auth with {SECRET} failed", "exiting"]
    r = runner(config({"command": "srv"}), factory, guard())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(r.run)
        await r.parts.first_attempt.wait()
        nursery.cancel_scope.cancel()
    row = msgspec.json.encode(status_of(r.parts)).decode()
    sentence = r.parts.outage().sentence()
    assert SECRET not in row and SECRET not in sentence
    assert SECRET not in (r.parts.downtime.last_error or "")
    assert "bad token" in sentence
    assert (
        len(r.parts.stderr) == 2
        and "exiting" in r.parts.stderr[1]
        and SECRET not in r.parts.stderr[0]
    )


async def test_why_a_server_failed_is_one_line_in_its_status(
    autojump_clock: trio.testing.MockClock,
) -> None:
    factory = Factory()
    factory.next = "fail"
    factory.failure = TransportClosed("closed\n[mcpd] The server 'notes' says:")
    r = runner(config({"command": "srv"}), factory, guard())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(r.run)
        await r.parts.first_attempt.wait()
        nursery.cancel_scope.cancel()
    assert status_of(r.parts).last_error == "closed\\n[mcpd] The server 'notes' says:"


async def test_a_session_that_ends_keeps_the_servers_last_stderr_masked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    factory = Factory()
    r = runner(config({"command": "srv"}), factory, guard())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(r.run)
        await until(r, "ready")
        factory.stderr.append(f"panic: {SECRET}")
        played = factory.current
        assert played is not None
        played.die(f"exited with status 1 ({SECRET})")
        r.parts.wake()
        await until(r, "failed")
        nursery.cancel_scope.cancel()
    assert r.parts.stderr and SECRET not in r.parts.stderr[-1] and "panic" in r.parts.stderr[-1]
    assert (
        SECRET not in msgspec.json.encode(status_of(r.parts)).decode()
        and SECRET not in r.parts.outage().sentence()
    )


async def test_a_bug_met_in_handling_a_server_makes_it_an_outage_not_a_crash(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    factory = Factory()
    factory.next = "fail"
    factory.failure = ValueError("unexpected")
    r = runner(config({"command": "srv"}), factory)
    with caplog.at_level(logging.ERROR, logger="mcpd.server"):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(r.run)
            await factory.wait_opened(2)  # and it is tried again
            nursery.cancel_scope.cancel()
    assert r.parts.outage().reason is not None and "internal error" in r.parts.outage().reason
    assert any("unexpected error" in rec.getMessage() for rec in caplog.records)


async def test_a_sandbox_its_start_could_not_apply_is_shown_and_logged(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    factory = Factory()
    factory.started = Started(pid=4242, mark="m", unprotected="no user namespaces")
    r = runner(config({"command": "srv"}), factory)
    with caplog.at_level(logging.WARNING, logger="mcpd"):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(r.run)
            await until(r, "ready")
            row = status_of(r.parts)
            assert r.parts.process is not None and r.parts.process.pid == 4242
            nursery.cancel_scope.cancel()
    assert isinstance(row.sandbox, SandboxStatus)
    assert row.sandbox.unprotected == "no user namespaces"
    assert any("no user namespaces" in rec.getMessage() for rec in caplog.records)
