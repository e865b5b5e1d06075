"""A machine identity (the client credentials grant) in a running daemon, against a
local protected MCP server: mcpd asks for its tokens itself, so no refusal of a token
it can replace sends it to ``needs_login``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.oauth.protected_mcp import ProtectedMcp, serve_protected

LIMIT = 20
TOOL = "mcp__m__whoami"
SECRET = "machine-secret-9f4c1e7b2a"


@contextlib.asynccontextmanager
async def machine_daemon(tmp: Path, **auth: Any) -> AsyncIterator[tuple[ProtectedMcp, Agent]]:
    """A protected server whose authorization server answers the client credentials
    grant (with a refresh token as well), and a daemon with it as ``m``."""
    srv = ProtectedMcp()
    srv.machine_grants = True
    srv.auth_method = "client_secret_basic"
    srv.client_secret = SECRET
    async with serve_protected(srv):
        table = {
            "type": "client_credentials",
            "client_id": srv.client_id,
            "client_secret": SECRET,
            "issuer": srv.base,
            **auth,
        }
        config = make_config(
            tmp,
            {"m": {"url": srv.mcp_url, "auth": table}},
            state_dir=str(tmp / "state"),
            startup_deadline=5.0,
        )
        async with running(config) as daemon, connect(daemon.socket_path) as agent:
            yield srv, agent


async def server_row(agent: Agent) -> dict[str, Any]:
    return (await agent.result("mcpd/status"))["servers"][0]  # type: ignore[no-any-return]


async def test_a_refused_refresh_token_brings_a_new_client_credentials_grant(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with machine_daemon(tmp_path) as (srv, agent):
            assert not (await agent.call(TOOL)).get("isError")
            assert srv.live_refresh  # the server handed a refresh token to mcpd
            srv.revoke_everything()
            answer = await agent.call(TOOL)
            assert not answer.get("isError"), answer
            row = await server_row(agent)
    assert row["state"] == "ready"
    assert srv.grants["refresh_token"] == 1  # tried once, then the credentials
    assert srv.grants["client_credentials"] == 2


async def test_a_call_refused_for_its_token_then_for_a_scope_goes_through(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with machine_daemon(tmp_path) as (srv, agent):
            assert not (await agent.call(TOOL)).get("isError")
            srv.revoke_access()
            srv.need_scope = "reports"
            answer = await agent.call(TOOL)
            row = await server_row(agent)
    assert not answer.get("isError"), answer
    assert answer["content"][0]["text"] == "called with token #2"  # the second since the void
    assert "reports" in srv.scope_of[srv.issued[-1]].split()
    assert row["state"] == "ready" and row["breaker"]["failures"] == 0


async def test_a_step_up_asks_for_no_scope_beyond_the_configured_ones(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with machine_daemon(tmp_path, scopes=["reports", "audit"]) as (srv, agent):
            assert not (await agent.call(TOOL)).get("isError")
            srv.need_scope = "admin"
            refused = await agent.call(TOOL)
            srv.need_scope = "audit"  # configured, so asked for from the start
            allowed = await agent.call(TOOL)
    assert refused["isError"] is True
    text = refused["content"][0]["text"]
    assert '"admin"' in text and "servers.m.auth.scopes" in text
    assert not allowed.get("isError"), allowed
    asked = [form.get("scope", "").split() for form in srv.token_forms]
    assert all("admin" not in scopes for scopes in asked)
    assert all(set(scopes) <= {"reports", "audit"} for scopes in asked)
