"""All configured servers under one supervisor, each reached through a scripted
transport: only enabled servers run; a reload starts, stops and restarts only the
servers whose config changed, gives calls in flight their grace, and takes a removed
server's tools away; status, the summary line and the outages say who is down."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
import trio
import trio.testing
from msgspec import Raw

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Config
from mcpd.config.tables.servertable import ServerConfig
from mcpd.registry.tables.catalog import Catalog
from mcpd.reloading.outcome import ReloadReport
from mcpd.servers.calling.calls import CallRefused
from mcpd.servers.supervisor import Supervisor, reload_said
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from tests.support.parts.calls import a_call
from tests.support.parts.stand_in import StandIn
from transports.base import AuthHook, NotificationHandler, ReplySink, Transport
from transports.errors import TransportClosed


class Scripted(StandIn):
    """A legacy server listing one tool, ``<alias>_tool``; tools/call is kept
    unanswered until the test answers it."""

    def __init__(self, alias: str) -> None:
        super().__init__()
        self.alias = alias
        self.calls: dict[rpc.Id, ReplySink] = {}
        self.forgotten: list[str] = []
        self._ids = iter(range(1, 10**6))

    def answer(self, method: str, params: Any) -> Any:
        if method == "initialize":
            return {"protocolVersion": mcp.LATEST_LEGACY, "capabilities": {"tools": {}}}
        if method == "tools/list":
            return {"tools": [{"name": f"{self.alias}_tool"}]}
        return super().answer(method, params)

    def send(self, method: str, params: Any, reply: ReplySink, **kw: Any) -> rpc.Id:
        rid = next(self._ids)
        self.calls[rid] = reply
        return rid

    def forget(self, rid: rpc.Id, reason: str) -> None:
        self.calls.pop(rid, None)
        self.forgotten.append(reason)


class Servers:
    """The transport factory: who was opened, how many times, and their transports."""

    def __init__(self, failing: frozenset[str] = frozenset()) -> None:
        self.opened: list[str] = []
        self.current: dict[str, Scripted] = {}
        self.failing = failing

    @contextlib.asynccontextmanager
    async def __call__(
        self,
        alias: str,
        cfg: ServerConfig,
        config: Config,
        on: NotificationHandler,
        auth: AuthHook | None,
    ) -> AsyncIterator[Transport]:
        self.opened.append(alias)
        if alias in self.failing:
            raise TransportClosed(f"{alias}: connection refused")
        t = Scripted(alias)
        self.current[alias] = t
        try:
            yield cast(Transport, t)
        finally:
            # As a transport does as it closes: what was sent fails.
            for reply in list(t.calls.values()):
                reply(None, TransportClosed(f"{alias}: the server was stopped"))


def config(servers: dict[str, dict[str, Any]], **daemon: Any) -> Config:
    return parse_config({"daemon": daemon, "servers": servers}, env={})


def stdio(*args: str, **more: Any) -> dict[str, Any]:
    return {"command": "srv", "args": list(args), **more}


@contextlib.asynccontextmanager
async def running(
    cfg: Config, servers: Servers, changed: list[str] | None = None
) -> AsyncIterator[Supervisor]:
    catalog = Catalog(cfg.naming)
    sup = Supervisor(
        cfg, catalog, (changed if changed is not None else []).append, transport_factory=servers
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        await sup.wait_started(trio.current_time() + 30)
        await trio.testing.wait_all_tasks_blocked()
        yield sup
        nursery.cancel_scope.cancel()


def tools(sup: Supervisor) -> list[str]:
    return sorted(e.local for e in sup.registry.entries())


async def test_only_enabled_servers_run_and_the_summary_counts_them(
    autojump_clock: trio.testing.MockClock,
) -> None:
    servers = Servers()
    cfg = config({"a": stdio(), "b": stdio(), "off": stdio(enabled=False)})
    async with running(cfg, servers) as sup:
        assert sorted(servers.opened) == ["a", "b"]
        assert sorted(sup.servers) == ["a", "b"]
        assert tools(sup) == ["mcp__a__a_tool", "mcp__b__b_tool"]
        assert sup.summary() == "2 servers: 2 ready"
        assert sup.summary(only=lambda alias: alias == "a") == "1 server: 1 ready"
        assert [row.alias for row in sup.status(only=lambda alias: alias == "b")] == ["b"]
        assert sup.outages() == [] and sup.processes() == {}


async def test_a_server_that_cannot_be_reached_is_in_the_outages_and_the_summary(
    autojump_clock: trio.testing.MockClock,
) -> None:
    servers = Servers(failing=frozenset({"down"}))
    async with running(config({"up": stdio(), "down": stdio()}), servers) as sup:
        (sentence,) = sup.outages()
        assert "down" in sentence and "connection refused" in sentence
        summary = sup.summary()
        assert summary.startswith("2 servers: 1 ready") and "(down)" in summary
        assert sup.counts().startswith("2 servers: 1 ready") and "down" not in sup.counts()


async def test_a_reload_touches_only_the_servers_whose_config_changed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    servers = Servers()
    changed: list[str] = []
    old = config({"same": stdio(), "edited": stdio("--v1"), "gone": stdio(), "off": stdio()})
    async with running(old, servers, changed) as sup:
        same = sup.servers["same"]
        opened = list(servers.opened)
        new = config(
            {
                "same": stdio(),
                "edited": stdio("--v2"),
                "added": stdio(),
                "off": stdio(enabled=False),
            },
            call_timeout=5,
        )
        report = await sup.reload(new)
        await trio.testing.wait_all_tasks_blocked()
        assert report.added == ["added"]
        assert report.removed == ["gone", "off"]
        assert report.changed == ["edited"] and report.unchanged == ["same"]
        assert sup.servers["same"] is same and same.config is new
        assert sorted(servers.opened[len(opened) :]) == ["added", "edited"]
        assert sorted(sup.servers) == ["added", "edited", "same"]
        assert tools(sup) == [
            "mcp__added__added_tool",
            "mcp__edited__edited_tool",
            "mcp__same__same_tool",
        ]
        assert sorted(set(changed) & {"gone", "off"}) == ["gone", "off"]


async def test_a_reloads_config_is_in_force_before_a_server_stops_and_its_calls_hear_why(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``adopt`` stops nothing; while ``restart`` waits for a changed server's call in
    flight, a call to it is told it restarts, and one to a removed server that it was
    removed."""
    servers = Servers()
    old = config({"same": stdio(), "edited": stdio("--v1"), "gone": stdio()}, call_timeout=10)
    async with running(old, servers) as sup:
        call, outcomes = a_call("edited_tool")
        sup.servers["edited"].scheduler.start(call)
        new = config({"same": stdio(), "edited": stdio("--v2")}, call_timeout=10)
        report = sup.adopt(new)
        assert (report.changed, report.removed) == (["edited"], ["gone"])
        assert sup.config is new and sup.servers["same"].config is new
        assert sorted(sup.servers) == ["edited", "gone", "same"]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sup.restart, report)
            await trio.testing.wait_all_tasks_blocked()
            assert sorted(sup.servers) == ["same"]
            assert sup.absent("edited") == "restarting for a changed configuration"
            assert sup.absent("gone") == "removed from the configuration"
            (rid,) = servers.current["edited"].calls
            servers.current["edited"].calls[rid](Raw(b'{"content":[]}'), None)
        assert await outcomes.result(call) == Raw(b'{"content":[]}')
        assert sorted(sup.servers) == ["edited", "same"]
        assert sup.absent("gone") == "removed from the configuration"


async def test_a_renaming_reload_renames_every_tool(
    autojump_clock: trio.testing.MockClock,
) -> None:
    servers = Servers()
    old = config({"a": stdio()})
    async with running(old, servers) as sup:
        new = parse_config(
            {"naming": {"template": "x_{alias}_{tool}"}, "servers": {"a": stdio()}}, env={}
        )
        report = await sup.reload(new)
        assert report.unchanged == ["a"]
        assert tools(sup) == ["x_a_a_tool"]
        assert servers.opened == ["a"]


async def test_a_call_in_flight_gets_its_grace_before_its_server_is_restarted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    servers = Servers()
    async with running(config({"a": stdio("--v1")}, call_timeout=10), servers) as sup:
        call, outcomes = a_call("a_tool")
        sup.servers["a"].scheduler.start(call)
        (rid,) = servers.current["a"].calls
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sup.reload, config({"a": stdio("--v2")}, call_timeout=10))
            await trio.sleep(4)
            assert servers.opened == ["a"]  # still waiting for the call
            servers.current["a"].calls[rid](Raw(b'{"content":[]}'), None)
        assert await outcomes.result(call) == Raw(b'{"content":[]}')
        assert trio.current_time() == start + 4
        assert servers.opened == ["a", "a"]


async def test_a_call_that_outlasts_the_grace_is_told_why(
    autojump_clock: trio.testing.MockClock,
) -> None:
    servers = Servers()
    async with running(config({"a": stdio()}, call_timeout=10), servers) as sup:
        call, outcomes = a_call("a_tool", timeout=1000)
        sup.servers["a"].scheduler.start(call)
        start = trio.current_time()
        await sup.reload(config({}, call_timeout=10))
        assert trio.current_time() == start + 10
        with pytest.raises(CallRefused) as refused:
            await outcomes.result(call)
        assert refused.value.outage.server == "a"
        assert refused.value.outage.reason == "a: the server was stopped"
        assert tools(sup) == [] and sup.servers == {}


def test_the_journals_reload_line_says_why_a_server_whose_table_did_not_change_restarts() -> None:
    report = ReloadReport(
        added=[],
        removed=[],
        changed=["edited", "seer"],
        unchanged=["calm"],
        why={"seer": "it could see what is now at /etc/mcpd.toml, which changed since it started"},
    )
    assert reload_said(report) == (
        "restarted (changed) edited, seer (it could see what is now at /etc/mcpd.toml, "
        "which changed since it started); 1 unchanged"
    )
