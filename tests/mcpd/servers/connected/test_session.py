"""One session with a server, built as a runner builds it, against a transport that
answers from a script: connecting and listing within their time, a server whose
prompts cannot be listed still serving its tools, what a server pushes passed on with
mcpd's secrets masked, and what ends a session that is being served."""

from __future__ import annotations

import json
import logging
from typing import Any, cast

import msgspec
import pytest
import trio
import trio.testing
from msgspec import Raw

from mcpd.config.credentials.secrets import HeldSecret
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Config, NamingConfig
from mcpd.policy.redaction.guard import SecretGuard
from mcpd.policy.redaction.masking import KnownSecrets, marker
from mcpd.registry.gating.limits import DEFAULT_LIMITS
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.asking.askback import Asker
from mcpd.servers.life.runner import Runner
from mcpd.servers.life.server_parts import ServerParts
from mcpd.servers.lists import rediscovery
from mcpd.servers.oauth import LoginRequired
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from tests.support.parts.stand_in import Never, StandIn
from transports.base import Transport
from transports.errors import TransportClosed, TransportError

SECRET = "tok-0123456789abcdef"
LEGACY_INIT = {"protocolVersion": mcp.LATEST_LEGACY, "capabilities": {"tools": {}}}


class ScriptedTransport(StandIn):
    """What a session uses of a transport, answering each method from ``answers``
    (a result, an error to raise, or ``Never``)."""

    def __init__(self, answers: dict[str, Any]) -> None:
        super().__init__()
        self.answers = answers

    def answer(self, method: str, params: Any) -> Any:
        return self.answers[method]


def config(era: str = "auto", **daemon: Any) -> Config:
    server = {"command": "x", "era": era}
    return parse_config({"daemon": daemon, "servers": {"srv": server}}, env={})


def runner(cfg: Config, guard: SecretGuard | None = None) -> ServerParts:
    return ServerParts(
        "srv", cfg.servers["srv"], cfg, Catalog(NamingConfig()), lambda a: None, guard=guard
    )


def transport(t: ScriptedTransport) -> Transport:
    return cast(Transport, t)


def note(method: str, params: Any) -> rpc.Notification:
    return rpc.Notification(method=method, params=Raw(json.dumps(params).encode()))


async def opened(r: ServerParts, t: ScriptedTransport, cfg: Config) -> Any:
    return await r.session.open(
        transport(t), http=False, settings=cfg.daemon, limits=DEFAULT_LIMITS
    )


# -- opening --


async def test_a_legacy_server_is_greeted_and_every_list_it_offers_fetched() -> None:
    cfg = config()
    r = runner(cfg)
    t = ScriptedTransport(
        {
            "server/discover": rpc.RPCError(rpc.METHOD_NOT_FOUND, "no"),
            "initialize": {**LEGACY_INIT, "capabilities": {"tools": {}, "prompts": {}}},
            "tools/list": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]},
            "prompts/list": {"prompts": [{"name": "p"}]},
        }
    )
    up, listing = await opened(r, t, cfg)
    assert up.era == "legacy" and [tool.name for tool in listing.tools] == ["t"]
    assert t.sent == [
        "server/discover",
        "initialize",
        "notifications/initialized",
        "tools/list",
        "prompts/list",
    ]
    assert r.registry.prompts.count("srv") == 1


async def test_a_server_whose_prompts_cannot_be_listed_still_serves_its_tools(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cfg = config()
    r = runner(cfg)
    t = ScriptedTransport(
        {
            "server/discover": rpc.RPCError(rpc.METHOD_NOT_FOUND, "no"),
            "initialize": {**LEGACY_INIT, "capabilities": {"tools": {}, "prompts": {}}},
            "tools/list": {"tools": [{"name": "t"}]},
            "prompts/list": {"prompts": "not a list"},
        }
    )
    with caplog.at_level(logging.WARNING, logger="mcpd.server"):
        _, listing = await opened(r, t, cfg)
    assert [tool.name for tool in listing.tools] == ["t"]
    (line,) = [rec.getMessage() for rec in caplog.records]
    assert line.startswith("srv: prompts/list failed: bad prompts/list result")


async def test_a_server_that_drops_while_listing_prompts_ends_the_session() -> None:
    cfg = config()
    r = runner(cfg)
    t = ScriptedTransport(
        {
            "server/discover": rpc.RPCError(rpc.METHOD_NOT_FOUND, "no"),
            "initialize": {**LEGACY_INIT, "capabilities": {"tools": {}, "prompts": {}}},
            "tools/list": {"tools": []},
            "prompts/list": TransportClosed("exited"),
        }
    )
    with pytest.raises(TransportClosed):
        await opened(r, t, cfg)


async def test_connecting_and_listing_share_one_time_limit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cfg = config(list_timeout=7)
    r = runner(cfg)
    t = ScriptedTransport(
        {
            "server/discover": rpc.RPCError(rpc.METHOD_NOT_FOUND, "no"),
            "initialize": LEGACY_INIT,
            "tools/list": Never(),
        }
    )
    start = trio.current_time()
    with pytest.raises(trio.TooSlowError):
        await opened(r, t, cfg)
    assert trio.current_time() == start + 7


@pytest.mark.parametrize(("era", "next_era"), [("auto", "legacy"), ("modern", "modern")])
async def test_a_process_that_dies_at_the_probe_is_next_started_at_legacy(
    era: str, next_era: str
) -> None:
    cfg = config(era=era)
    r = runner(cfg)
    t = ScriptedTransport({"server/discover": TransportClosed("exited")})
    with pytest.raises(TransportClosed):
        await opened(r, t, cfg)
    assert r.session.era_hint == next_era
    if era == "auto":
        t = ScriptedTransport({"initialize": LEGACY_INIT, "tools/list": {"tools": []}})
        up, _ = await opened(r, t, cfg)
        assert up.era == "legacy" and t.sent[0] == "initialize"


# -- what the server pushes --


async def test_a_secret_in_what_a_server_pushes_is_masked_before_anyone_sees_it() -> None:
    known = KnownSecrets()
    known.replace("config", [HeldSecret("servers.srv.env.TOKEN", SECRET)])
    cfg = config()
    r = runner(cfg, SecretGuard(known))
    updated: list[str] = []
    r.prompt_resources.on_updated = lambda alias, uri: updated.append(uri)
    heard: list[Any] = []
    r.logs.on_message = lambda alias, message: heard.append(message)
    r.logs.want("debug")
    r.session.on_notification(note("notifications/resources/updated", {"uri": f"file:///{SECRET}"}))
    r.session.on_notification(
        note("notifications/message", {"level": "error", "data": f"leaked {SECRET}"})
    )
    assert updated == [f"file:///{marker('servers.srv.env.TOKEN')}"]
    assert len(heard) == 1 and SECRET not in msgspec.json.encode(heard[0]).decode()


class Waiting:
    """A call waiting for its answer: what progress gives it."""

    def __init__(self) -> None:
        self.timeout = 30.0
        self.asker: Asker | None = None
        self.asking = 0
        self.extended: list[float] = []

    def extend(self, seconds: float) -> None:
        self.extended.append(seconds)


async def test_progress_reaches_the_agent_of_its_call_with_the_agents_token() -> None:
    cfg = config()
    r = runner(cfg)
    reports: list[Any] = []
    call = Waiting()
    token = r.progress.open("agent-7", reports.append, call)
    r.session.on_notification(
        note("notifications/progress", {"progressToken": token, "progress": 1})
    )
    r.session.on_notification(
        note("notifications/progress", {"progressToken": "other", "progress": 2})
    )
    assert [(p.progressToken, p.progress) for p in reports] == [("agent-7", 1)]
    assert call.extended == [30.0]


async def test_progress_reaches_the_agent_without_what_the_server_put_under_mcpds_keys() -> None:
    r = runner(config())
    reports: list[Any] = []
    token = r.progress.open("agent-7", reports.append, Waiting())
    meta = {"mcpd/server": "notes", "mcpd/outage": {"state": "failed"}, "step": "two"}
    r.session.on_notification(
        note("notifications/progress", {"progressToken": token, "progress": 1, "_meta": meta})
    )
    (report,) = reports
    assert msgspec.json.decode(msgspec.json.encode(report))["_meta"] == {"step": "two"}


# -- serving --


async def serve(r: ServerParts, t: ScriptedTransport, cfg: Config) -> None:
    up, _ = await opened(r, t, cfg)
    await r.session.serve(up, transport(t), lambda: None)


def legacy_server() -> ScriptedTransport:
    return ScriptedTransport(
        {
            "server/discover": rpc.RPCError(rpc.METHOD_NOT_FOUND, "no"),
            "initialize": LEGACY_INIT,
            "tools/list": {"tools": []},
            "ping": {},
        }
    )


async def test_a_transport_that_closes_ends_the_session_with_its_error() -> None:
    cfg = config()
    r = runner(cfg)
    t = legacy_server()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:

            async def close() -> None:
                await trio.testing.wait_all_tasks_blocked()
                t.error = TransportClosed("the server exited (code 3)")
                t.closed.set()

            nursery.start_soon(close)
            with pytest.raises(TransportClosed, match="code 3"):
                await serve(r, t, cfg)


async def test_a_list_change_while_served_is_fetched_by_the_sessions_task(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cfg = config()
    r = runner(cfg)
    t = legacy_server()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve, r, t, cfg)
            await trio.sleep(5)
            t.sent.clear()
            t.answers["tools/list"] = {"tools": [{"name": "new"}]}
            r.session.on_notification(rpc.Notification("notifications/tools/list_changed", None))
            await trio.sleep(5)
            assert t.sent == ["tools/list"]
            assert [e.local for e in r.registry.entries()] == ["mcp__srv__new"]
            nursery.cancel_scope.cancel()


class HoldingList(ScriptedTransport):
    """Holds the next tools/list, once ``hold`` is set, until ``release`` is."""

    def __init__(self, answers: dict[str, Any]) -> None:
        super().__init__(answers)
        self.hold = False
        self.held = trio.Event()
        self.release = trio.Event()

    async def request(self, method: str, params: Any, **kw: Any) -> Raw:
        if method == "tools/list" and self.hold:
            self.hold = False
            self.held.set()
            await self.release.wait()
        return await super().request(method, params, **kw)


async def test_a_probe_asked_for_while_the_sessions_task_is_busy_is_not_lost(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cfg = config()
    r = runner(cfg)
    t = HoldingList(legacy_server().answers)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve, r, t, cfg)
            await trio.sleep(5)
            t.hold = True
            r.session.on_notification(rpc.Notification("notifications/tools/list_changed", None))
            await t.held.wait()  # the session's task waits for the list
            t.sent.clear()
            r.check_liveness()  # a call failed meanwhile
            t.release.set()
            await trio.sleep(5)
            # The list it waited for, and the probe (a legacy server's is a ping), which
            # does not wait for the list: in either order.
            assert sorted(t.sent) == ["ping", "tools/list"]
            nursery.cancel_scope.cancel()


async def test_a_list_not_answered_in_time_has_the_server_probed_and_the_session_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cfg = config(list_timeout=2.0)
    r = runner(cfg)
    t = HoldingList(legacy_server().answers)
    t.answers["tools/list"] = {"tools": [{"name": "old"}]}
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve, r, t, cfg)
            await trio.sleep(5)
            t.hold = True
            r.session.on_notification(rpc.Notification("notifications/tools/list_changed", None))
            await t.held.wait()  # and never let go
            t.sent.clear()
            await trio.sleep(5)
            # The probe the wait out of time asks for (a legacy server's is a ping)
            # is answered: the server is there, and nothing was installed meanwhile
            # (the list of the connect is installed by the runner, not here).
            assert t.sent == ["ping"]
            assert r.registry.entries() == []
            assert r.breaker.state == "closed"
            t.answers["tools/list"] = {"tools": [{"name": "new"}]}
            r.session.on_notification(rpc.Notification("notifications/tools/list_changed", None))
            await trio.sleep(5)
            assert [e.local for e in r.registry.entries()] == ["mcp__srv__new"]
            nursery.cancel_scope.cancel()


async def test_a_login_needed_while_served_ends_the_session() -> None:
    cfg = parse_config({"servers": {"srv": {"url": "https://mcp.example.com/mcp"}}}, env={})
    r = runner(cfg)
    Runner(r)  # not run: what it hears of the login ends the session all the same
    assert r.auth is not None
    t = legacy_server()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:

            async def lose() -> None:
                await trio.testing.wait_all_tasks_blocked()
                assert r.auth is not None
                r.auth.lost("the server asks for a login")

            nursery.start_soon(lose)
            with pytest.raises(LoginRequired, match="mcpd auth login srv"):
                await serve(r, t, cfg)


# -- a modern server's discover answer, asked for again once its ttl passed


def modern_server(ttl_ms: int) -> ScriptedTransport:
    return ScriptedTransport(
        {
            "server/discover": discovered({"tools": {}}, ttl_ms),
            "tools/list": {"resultType": "complete", "tools": [], "ttlMs": 0},
            "prompts/list": {"resultType": "complete", "prompts": [{"name": "p"}], "ttlMs": 0},
        }
    )


def discovered(capabilities: dict[str, Any], ttl_ms: int) -> dict[str, Any]:
    return {
        "resultType": "complete",
        "supportedVersions": [mcp.LATEST_MODERN],
        "capabilities": capabilities,
        "ttlMs": ttl_ms,
        "cacheScope": "public",
    }


async def test_a_modern_server_is_asked_its_capabilities_again_once_their_ttl_passed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cfg = config()
    r = runner(cfg)
    t = modern_server(ttl_ms=0)
    with trio.fail_after(600):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve, r, t, cfg)
            await trio.sleep(5)
            assert t.sent == ["server/discover", "tools/list"]
            # A ttl of 0 is not a reason to ask before every list: lists fetched within
            # the floor go without asking.
            t.sent.clear()
            for _ in range(3):
                r.tool_list.request()
                await trio.sleep(5)
            assert t.sent == ["tools/list"] * 3
            # Past the floor, the next list is fetched under capabilities asked for
            # again: the server offers prompts now, and they are listed.
            await trio.sleep(rediscovery.FLOOR)
            t.sent.clear()
            t.answers["server/discover"] = discovered({"tools": {}, "prompts": {}}, 0)
            r.tool_list.request()
            await trio.sleep(5)
            assert t.sent == ["server/discover", "tools/list", "prompts/list"]
            assert r.registry.prompts.count("srv") == 1
            nursery.cancel_scope.cancel()


async def test_a_ttl_longer_than_the_floor_keeps_the_capabilities_for_all_of_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cfg = config()
    r = runner(cfg)
    t = modern_server(ttl_ms=3_600_000)
    with trio.fail_after(7200):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve, r, t, cfg)
            await trio.sleep(3000)
            t.sent.clear()
            r.tool_list.request()
            await trio.sleep(5)
            assert t.sent == ["tools/list"]
            await trio.sleep(600)
            t.sent.clear()
            r.tool_list.request()
            await trio.sleep(5)
            assert t.sent == ["server/discover", "tools/list"]
            nursery.cancel_scope.cancel()


async def test_a_modern_server_that_no_longer_lists_the_sessions_version_is_greeted_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cfg = config()
    r = runner(cfg)
    t = modern_server(ttl_ms=0)

    async def upgraded() -> None:
        await trio.sleep(rediscovery.FLOOR + 5)
        t.answers["server/discover"] = {
            **discovered({"tools": {}}, 0),
            "supportedVersions": ["2099-01-01"],
        }
        r.tool_list.request()

    with trio.fail_after(600):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(upgraded)
            with pytest.raises(TransportError, match="no longer lists"):
                await serve(r, t, cfg)


async def test_a_rediscovery_whose_versions_list_is_too_long_to_read_says_so(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cfg = config()
    r = runner(cfg)
    t = modern_server(ttl_ms=0)

    async def swollen() -> None:
        await trio.sleep(rediscovery.FLOOR + 5)
        t.answers["server/discover"] = {
            **discovered({"tools": {}}, 0),
            "supportedVersions": ["2026-07-28"] + ["x" * 64] * 200,
        }
        r.tool_list.request()

    with trio.fail_after(600):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(swollen)
            with pytest.raises(TransportError) as ended:
                await serve(r, t, cfg)
    said = str(ended.value)
    assert "no longer lists" not in said
    assert "supportedVersions is" in said and "more than the 4,096 mcpd reads" in said
