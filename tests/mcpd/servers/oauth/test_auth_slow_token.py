"""A slow token endpoint is the authorization server's failure, not the MCP server's:
calls that wait for one refresh share its outcome (one token request, each told why),
a liveness probe that waited for a token does not end the session, the breaker does
not count it, and a refresh that got no answer says its refresh token may be spent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.tables.model import Config
from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.oauth.protected_mcp import ProtectedMcp, login, serve_protected

LIMIT = 30
TOOL = "mcp__t__whoami"
TOKEN_TIMEOUT = 3


@pytest.fixture(autouse=True)
def _short_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("mcpd.servers.oauth.state.TOKEN_REQUEST_TIMEOUT", TOKEN_TIMEOUT)
    monkeypatch.setattr("mcpd.servers.connected.health.LIVENESS_TIMEOUT", 0.5)


def config_for(tmp: Path, srv: ProtectedMcp, **daemon: Any) -> Config:
    return make_config(
        tmp,
        {"t": {"url": srv.mcp_url, "max_concurrency": 64}},
        state_dir=str(tmp / "state"),
        startup_deadline=5.0,
        **daemon,
    )


def unanswered(srv: ProtectedMcp) -> str:
    return (
        "The tool server 't' is unavailable (auth_failed): cannot refresh the access token: t: "
        f'authorization: token refresh to "{srv.base}/token" timed out after {TOKEN_TIMEOUT} s; '
        "the authorization server may have used up the refresh token mcpd sent, and if the "
        "next refresh is refused a login is needed."
    )


async def server_row(agent: Agent) -> dict[str, Any]:
    return (await agent.result("mcpd/status"))["servers"][0]  # type: ignore[no-any-return]


async def test_calls_waiting_for_one_refresh_that_times_out_share_its_outcome(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    texts: list[str] = []

    async def call(socket: str) -> None:
        async with connect(socket) as agent:
            texts.append((await agent.call(TOOL))["content"][0]["text"])

    with trio.fail_after(LIMIT):
        async with serve_protected() as srv, running(config_for(tmp_path, srv)) as daemon:
            async with connect(daemon.socket_path) as agent:
                await login(agent, srv)
                srv.revoke_access()
                srv.gate = trio.Event()  # the token endpoint answers nothing
                async with trio.open_nursery() as calls:
                    for _ in range(6):
                        calls.start_soon(call, daemon.socket_path)
                row = await server_row(agent)
            srv.gate.set()
    assert srv.grants["refresh_token"] == 1
    assert [text.split(". The call")[0] + "." for text in texts] == [unanswered(srv)] * 6
    assert row["restarts"] == 0 and row["breaker"]["failures"] == 0
    assert row["state"] == "ready"
    assert "stopped responding" not in caplog.text


async def test_a_liveness_probe_that_waits_for_a_token_does_not_end_the_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            config = config_for(tmp_path, srv, health_interval=0.05)
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                await login(agent, srv)
                srv.revoke_access()
                srv.gate = trio.Event()
                texts: list[str] = []

                async def call() -> None:
                    texts.append((await agent.call(TOOL))["content"][0]["text"])

                async with trio.open_nursery() as calls:
                    calls.start_soon(call)
                    await srv.token_request.wait()  # the call's refresh is held
                    srv.refused = trio.Event()
                    await srv.refused.wait()  # a probe was refused, and waits for it too
                row = await server_row(agent)
                srv.gate.set()
    assert texts[0].startswith(unanswered(srv)[:-1])
    assert row["restarts"] == 0 and row["state"] == "ready"
    assert "stopped responding" not in caplog.text
