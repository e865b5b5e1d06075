"""The daemon's side of OAuth, against a local protected MCP server: a server that
asks for a login waits in ``needs_login`` (shown everywhere, never retried into a
crash loop or an open breaker), a login through the socket brings it back, tokens
are refreshed before they expire and after a 401 with one token request however
many calls wait, and they survive a restart in a 0600 file."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import trio

from mcpd.config.tables.model import Config
from mcpd.daemon import Daemon
from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.oauth.browser_step import follow_authorization
from tests.support.oauth.protected_mcp import REDIRECT, ProtectedMcp, login, serve_protected
from transports.http.oauth_client import OAuthHttp

LIMIT = 20
TOOL = "mcp__t__whoami"


def config_for(tmp: Path, srv: ProtectedMcp, **server: Any) -> Config:
    return make_config(
        tmp,
        {"t": {"url": srv.mcp_url, "max_concurrency": 64, **server}},
        state_dir=str(tmp / "state"),
        startup_deadline=5.0,
    )


@contextlib.asynccontextmanager
async def daemon_with(tmp: Path) -> AsyncIterator[tuple[ProtectedMcp, Daemon, Agent]]:
    """The protected server, a daemon with it as ``t``, and an agent of that daemon."""
    async with (
        serve_protected() as srv,
        running(config_for(tmp, srv)) as daemon,
        connect(daemon.socket_path) as agent,
    ):
        yield srv, daemon, agent


async def server_row(agent: Agent) -> dict[str, Any]:
    return (await agent.result("mcpd/status"))["servers"][0]  # type: ignore[no-any-return]


async def test_a_server_that_asks_for_a_login_waits_for_one(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path) as (srv, _daemon, agent):
            row = await server_row(agent)
            assert row["state"] == "needs_login"
            assert row["last_error"] == ("the server asks for a login; run `mcpd auth login t`")
            assert row["retry_at"] is None
            assert row["breaker"]["failures"] == 0
            first = len(srv.http.requests)
            # Time passes, calls come: nothing is retried behind the user's back.
            await trio.sleep(0.5)
            assert len(srv.http.requests) == first
            assert (await server_row(agent))["restarts"] == 0
            auth = (await agent.result("mcpd/auth/status"))["servers"][0]
            assert auth["state"] == "needs_login"
            assert auth["server_state"] == "needs_login"

            out = await login(agent, srv)
            assert out == {"resultType": "complete", "server": "t", "state": "ready", "tools": 1}
            assert (await agent.call(TOOL))["content"][0]["text"] == ("called with token #1")
            status = (await agent.result("mcpd/auth/status"))["servers"][0]
            assert status["state"] == "logged_in"
            assert status["issuer"] == srv.base
            assert status["refreshable"] is True
    assert srv.failures == []  # PKCE, resource and redirect_uri all matched at the server


async def test_a_redirect_without_the_logins_state_leaves_it_waiting(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path) as (srv, _daemon, agent):
            start = await agent.result("mcpd/auth/login", {"server": "t", "redirect_uri": REDIRECT})
            http = OAuthHttp()
            redirect = await follow_authorization(
                http, start["url"], await http.policy_for(srv.mcp_url)
            )
            state = parse_qs(urlsplit(redirect).query)["state"][0]
            for stray in [
                f"{REDIRECT}?code=stolen&state=guessed&iss={srv.base}",
                f"{REDIRECT}?code=stolen&iss={srv.base}",
                f"{REDIRECT}?error=access_denied&state={state}x",
            ]:
                done = {"server": "t", "login": start["login"], "redirect": stray}
                refused = await agent.rpc("mcpd/auth/complete", done)
                assert "does not carry this login's state" in refused["error"]["message"]
            assert srv.grants["authorization_code"] == 0  # no stray code was tried
            done = {"server": "t", "login": start["login"], "redirect": redirect}
            out = await agent.result("mcpd/auth/complete", done)
    assert out == {"resultType": "complete", "server": "t", "state": "ready", "tools": 1}


async def test_the_outage_names_the_login_in_the_tool_list_and_call_results(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            config = config_for(tmp_path, srv)
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                await login(agent, srv)
            # Restart without the refresh token working: the saved tools stay listed.
            srv.revoke_everything()
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                assert (await server_row(agent))["state"] == "needs_login"
                (tool,) = [t for t in await agent.tools() if t["name"] == TOOL]
                assert tool["_meta"]["mcpd/available"] is False
                assert tool["description"].startswith("[unavailable: t needs a login since ")
                assert "(run `mcpd auth login t`)]" in tool["description"]
                result = await agent.call(TOOL)
                assert result["isError"] is True
                text = result["content"][0]["text"]
                assert text.startswith("The tool server 't' is unavailable (needs_login): ")
                assert "mcpd auth login t" in text
                assert text.endswith(
                    "ask the user to log in to 't' (`mcpd auth login t`) or to give mcpd a "
                    "token for it, then call this tool again."
                )
                assert result["_meta"]["mcpd/outage"]["state"] == "needs_login"


async def test_fifty_calls_during_a_refresh_make_one_token_request(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path) as (srv, daemon, agent):
            await login(agent, srv)
            auth = daemon.supervisor.servers["t"].auth
            assert auth is not None
            # Move the daemon's clock to a minute before the token expires.
            auth.clock = lambda: time.time() + 3550
            srv.gate, srv.token_request = trio.Event(), trio.Event()
            before = srv.grants["refresh_token"]
            results: list[dict[str, Any]] = []

            async def one() -> None:
                results.append(await agent.call(TOOL))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(one)
                await srv.token_request.wait()  # the refresh is under way
                for _ in range(49):
                    nursery.start_soon(one)
                runner = daemon.supervisor.servers["t"]
                while runner.inflight < 50:
                    await trio.sleep(0.01)
                assert srv.calls == []  # all of them wait for the new token
                srv.gate.set()
    assert srv.grants["refresh_token"] - before == 1
    assert len(results) == 50
    assert all(not r.get("isError") for r in results), results[:3]
    assert {r["content"][0]["text"] for r in results} == {"called with token #2"}


async def test_a_401_is_answered_by_one_refresh_for_all_waiting_calls(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path) as (srv, _daemon, agent):
            await login(agent, srv)
            srv.revoke_access()  # the server no longer takes the token
            before = srv.grants["refresh_token"]
            results: list[dict[str, Any]] = []

            async def one() -> None:
                results.append(await agent.call(TOOL))

            async with trio.open_nursery() as nursery:
                for _ in range(20):
                    nursery.start_soon(one)
            row = await server_row(agent)
    assert srv.grants["refresh_token"] - before == 1
    assert [r.get("isError", False) for r in results] == [False] * 20
    assert row["state"] == "ready" and row["breaker"]["failures"] == 0


async def test_a_revoked_refresh_token_means_needs_login_then_a_login_brings_it_back(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path) as (srv, _daemon, agent):
            await login(agent, srv)
            srv.revoke_everything()
            results = [await agent.call(TOOL) for _ in range(8)]
            row = await server_row(agent)
            assert row["state"] == "needs_login"
            assert row["last_error"].startswith(
                "the authorization server no longer accepts mcpd's refresh token"
            )
            # Eight calls into a server that needs a login: no breaker storm.
            assert row["breaker"] == {
                "state": "closed",
                "consecutive_failures": 0,
                "failures": 0,
                "opened": 0,
            }
            assert srv.grants["refresh_token"] == 1  # tried once, not per call
            assert (await login(agent, srv))["state"] == "ready"
            assert not (await agent.call(TOOL)).get("isError")
    for result in results:
        assert result["isError"] is True
        assert result["_meta"]["mcpd/outage"]["state"] == "needs_login"
        assert "run `mcpd auth login t`" in result["content"][0]["text"]


async def test_tokens_survive_a_restart_in_a_private_file(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            config = config_for(tmp_path, srv)
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                await login(agent, srv)
            path = tmp_path / "state" / "oauth" / "t.json"
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
            assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
            logins = srv.grants["authorization_code"]
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                assert (await server_row(agent))["state"] == "ready"
                assert not (await agent.call(TOOL)).get("isError")
                # Logging out forgets the tokens (revoked at the server) and needs a login.
                out = await agent.result("mcpd/auth/logout", {"server": "t"})
                assert out["revoked"] == ["refresh_token", "access_token"]
                assert [*out][-3:] == ["problem", "unrevoked", "forgot_client"]
                with trio.fail_after(5):
                    while (await server_row(agent))["state"] != "needs_login":
                        await trio.sleep(0.02)
    assert srv.grants["authorization_code"] == logins  # no new login was needed
    assert b"access-" not in path.read_bytes()


async def test_a_saved_login_is_not_sent_to_another_url(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            config = config_for(tmp_path, srv)
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                await login(agent, srv)
            moved = config_for(tmp_path, srv, url=srv.mcp_url + "?tenant=2")
            async with running(moved) as daemon, connect(daemon.socket_path) as agent:
                assert (await server_row(agent))["state"] == "needs_login"
    last = srv.http.requests[-1]
    assert last.target == "/mcp?tenant=2" and last.header("authorization") is None


async def test_serve_warns_in_the_journal_of_a_client_secret_no_issuer_pins(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("cs-0123456789abcdef")
    secret.chmod(0o600)
    auth = {"client_id": "c", "client_secret": f"${{file:{secret}}}"}
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            config = config_for(tmp_path, srv, auth=auth)
            async with running(config):
                pass
    (warning,) = [
        r
        for r in caplog.records
        if getattr(r, "mcpd_server", None) == "t"
        and getattr(r, "mcpd_event", None) == "unpinned_client"
    ]
    assert warning.levelno == logging.WARNING
    assert warning.getMessage().startswith(
        "servers.t.auth: a client_secret with no issuer: mcpd sends the secret to whichever "
        "authorization server the server names"
    )


class _Heard(logging.Handler):
    """Sets ``event`` when a record of the journal event ``name`` is logged."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name_heard = name
        self.event = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "mcpd_event", None) == self.name_heard:
            self.event.set()


async def _call_quietly(agent: Agent) -> None:
    with contextlib.suppress(Exception):
        await agent.call(TOOL)


async def test_a_stop_during_a_token_refresh_keeps_the_refresh_token_it_brings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    heard = _Heard("refresh_awaited")
    logging.getLogger("mcpd.auth").addHandler(heard)
    try:
        with trio.fail_after(LIMIT):
            async with serve_protected() as srv:
                config = config_for(tmp_path, srv)
                async with trio.open_nursery() as calls:
                    async with running(config) as daemon:
                        async with connect(daemon.socket_path) as agent:
                            await login(agent, srv)
                        srv.revoke_access()  # the next call is refused and refreshes
                        srv.answer_gate = trio.Event()
                        waiting = await calls.start(_connected, daemon.socket_path)
                        calls.start_soon(_call_quietly, waiting)
                        await srv.issued_held.wait()  # rotated, the answer not yet sent

                        async def answer_once_the_stop_waits(gate: trio.Event) -> None:
                            await heard.event.wait()
                            gate.set()

                        calls.start_soon(answer_once_the_stop_waits, srv.answer_gate)
                    calls.cancel_scope.cancel()
                srv.answer_gate = None
                async with running(config) as daemon, connect(daemon.socket_path) as agent:
                    assert (await server_row(agent))["state"] == "ready"
                    text = (await agent.call(TOOL))["content"][0]["text"]
    finally:
        logging.getLogger("mcpd.auth").removeHandler(heard)
    # The first token issued since the old ones were forgotten: the refresh's.
    assert text == "called with token #1"
    assert srv.reused == [] and srv.grants["refresh_token"] == 1
    (waits,) = [r for r in caplog.records if getattr(r, "mcpd_event", None) == "refresh_awaited"]
    assert waits.getMessage() == (
        "t: the server stops once the token refresh under way is answered (within 10 s)"
    )


def _short_calls(tmp: Path, srv: ProtectedMcp, **server: Any) -> Config:
    # Calls get little time, so a reload does not wait for the one in flight.
    return make_config(
        tmp,
        {"t": {"url": srv.mcp_url, **server}},
        state_dir=str(tmp / "state"),
        call_timeout=0.5,
    )


async def test_a_reload_during_a_token_refresh_keeps_the_refresh_token_it_brings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)  # the line the test waits for
    heard = _Heard("refresh_awaited")
    logging.getLogger("mcpd.auth").addHandler(heard)
    try:
        with trio.fail_after(LIMIT):
            async with serve_protected() as srv:
                config = _short_calls(tmp_path, srv)
                async with running(config) as daemon, trio.open_nursery() as tasks:
                    async with connect(daemon.socket_path) as agent:
                        await login(agent, srv)
                    srv.revoke_access()
                    srv.answer_gate = trio.Event()
                    waiting = await tasks.start(_connected, daemon.socket_path)
                    tasks.start_soon(_call_quietly, waiting)
                    await srv.issued_held.wait()
                    changed = _short_calls(tmp_path, srv, max_concurrency=8)  # t starts again
                    reloaded = trio.Event()

                    async def reload() -> None:
                        await daemon.supervisor.reload(changed)
                        reloaded.set()

                    tasks.start_soon(reload)
                    await heard.event.wait()  # the old t waits for the refresh's answer
                    srv.answer_gate.set()
                    await reloaded.wait()
                    async with connect(daemon.socket_path) as agent:
                        with trio.fail_after(5):
                            runner = daemon.supervisor.servers["t"]
                            while (await server_row(agent))["state"] != "ready":
                                await runner.phase_changed()
                        text = (await agent.call(TOOL))["content"][0]["text"]
                    tasks.cancel_scope.cancel()
    finally:
        logging.getLogger("mcpd.auth").removeHandler(heard)
    assert text == "called with token #1"  # the refresh's, used by the new t
    assert srv.reused == [] and srv.grants["refresh_token"] == 1


async def _connected(
    socket_path: str, *, task_status: trio.TaskStatus[Agent] = trio.TASK_STATUS_IGNORED
) -> None:
    async with connect(socket_path) as agent:
        task_status.started(agent)
        await trio.sleep_forever()


async def test_a_removed_servers_saved_login_is_listed_until_logged_out(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            config = config_for(tmp_path, srv)
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                await login(agent, srv)
            # The same state, with t gone from the configuration and another server in it.
            others = make_config(
                tmp_path,
                {"u": {"url": srv.mcp_url}},
                state_dir=str(tmp_path / "state"),
                startup_deadline=5.0,
            )
            async with running(others) as daemon, connect(daemon.socket_path) as agent:
                listed = await agent.result("mcpd/auth/status")
                out = await agent.result("mcpd/auth/logout", {"server": "t"})
                after = await agent.result("mcpd/auth/status")
    assert listed["unconfigured"] == ["t"]
    assert [row["server"] for row in listed["servers"]] == ["u"]
    assert out["removed"].endswith("t.json")
    assert [*out] == [
        *("resultType", "server", "had_tokens", "revoked", "not_revocable", "problem"),
        *("unrevoked", "removed"),
    ]
    assert after["unconfigured"] == []
