"""OAuth with an old HTTP+SSE (2024-11-05) server, through a running daemon: the
stream's GET and every POST carry the token a login got, a refused token is renewed
and the message sent again, and a server found to speak the old transport only after
the Streamable HTTP one failed is asked that question with the token too."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio

from mcpd.daemon import Daemon
from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.oauth.protected_mcp import login
from tests.support.oauth.sse import ProtectedSSE, serve_protected_sse

LIMIT = 20
TOOL = "mcp__a__echo"


@contextlib.asynccontextmanager
async def daemon_with(
    tmp: Path, stream_path: str, **server: Any
) -> AsyncIterator[tuple[ProtectedSSE, Daemon, Agent]]:
    async with serve_protected_sse(stream_path) as srv:
        config = make_config(
            tmp,
            {"a": {"url": srv.mcp_url, **server}},
            state_dir=str(tmp / "state"),
            startup_deadline=5.0,
        )
        async with running(config) as daemon, connect(daemon.socket_path) as agent:
            yield srv, daemon, agent


async def server_row(agent: Agent) -> dict[str, Any]:
    return (await agent.result("mcpd/status"))["servers"][0]  # type: ignore[no-any-return]


async def echo(agent: Agent, text: str) -> str:
    result = await agent.call(TOOL, {"text": text})
    assert not result.get("isError"), result
    return result["content"][0]["text"]  # type: ignore[no-any-return]


async def needs_a_login_then_serves_with_the_token(srv: ProtectedSSE, agent: Agent) -> None:
    row = await server_row(agent)
    assert row["state"] == "needs_login"
    assert "mcpd auth login a" in row["last_error"]
    assert await login(agent, srv, "a") == {
        "resultType": "complete",
        "server": "a",
        "state": "ready",
        "tools": 1,
    }
    assert await echo(agent, "hello") == "hello"
    assert (await agent.result("mcpd/auth/status"))["servers"][0]["state"] == "logged_in"
    token = f"Bearer {srv.issued[-1]}"
    since_login = srv.seen[[auth for _, _, auth in srv.seen].index(token) :]
    assert {(method, path) for method, path, _ in since_login} >= {
        ("GET", srv.sse.stream_path),
        ("POST", "/messages"),
    }
    assert {auth for _, _, auth in since_login} == {token}


async def test_an_sse_server_gets_the_token_on_its_stream_and_every_message(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path, "/sse", transport="sse") as (srv, _daemon, agent):
            await needs_a_login_then_serves_with_the_token(srv, agent)
            # The server forgets the token: the refused message is sent again with a
            # refreshed one, on the same stream.
            srv.revoke_access()
            before = srv.grants["refresh_token"]
            assert await echo(agent, "again") == "again"
            assert srv.grants["refresh_token"] == before + 1
            assert srv.seen[-1] == ("POST", "/messages", f"Bearer {srv.issued[-1]}")
            assert len(srv.sse.all_sessions) == 1
            assert (await server_row(agent))["state"] == "ready"


async def test_an_sse_server_found_after_streamable_http_failed_is_asked_with_the_token(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path, "/events") as (srv, _daemon, agent):
            await needs_a_login_then_serves_with_the_token(srv, agent)
            # Streamable HTTP was tried first, with the token, and refused for its method.
            assert ("POST", "/events", f"Bearer {srv.issued[0]}") in srv.seen
            row = await server_row(agent)
            assert (row["state"], row["transport"]) == ("ready", "sse")
