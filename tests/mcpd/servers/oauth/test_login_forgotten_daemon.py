"""An authorization server that no longer knows the client mcpd registered with it (it
lost its store, or purges clients): the server shows that a login is needed, and why,
and the next login registers a new client rather than showing the lost one again; a
logout keeps the client unless asked to forget it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.oauth.login import mcpd
from tests.support.oauth.protected_mcp import ProtectedMcp, login, serve_protected

LIMIT = 20
TOOL = "mcp__t__whoami"


def registrations(srv: ProtectedMcp) -> list[str]:
    return [r.target for r in srv.http.requests if (r.method, r.target) == ("POST", "/register")]


async def server_row(agent: Agent) -> dict[str, Any]:
    return (await agent.result("mcpd/status"))["servers"][0]  # type: ignore[no-any-return]


async def test_a_client_the_authorization_server_forgot_is_registered_again_at_the_next_login(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            config = make_config(
                tmp_path,
                {"t": {"url": srv.mcp_url}},
                state_dir=str(tmp_path / "state"),
                startup_deadline=5.0,
            )
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                await login(agent, srv)
                assert len(registrations(srv)) == 1
                # The authorization server restarts with an empty store: the access
                # token and the client it was issued to are unknown there now.
                srv.client_id = "registered-after-the-loss"
                srv.revoke_access()
                called = await agent.call(TOOL)
                assert called["isError"] is True
                assert called["_meta"]["mcpd/outage"]["state"] == "needs_login"
                row = await server_row(agent)
                assert row["state"] == "needs_login"
                assert row["last_error"].startswith(
                    "the authorization server no longer accepts the client mcpd registered "
                    "with it: the refresh_token request to"
                )
                assert row["last_error"].endswith(
                    '(HTTP 401, "invalid_client"); mcpd forgot that client, and the next login '
                    "registers a new one; run `mcpd auth login t`"
                )
                (entry,) = (await agent.result("mcpd/auth/status"))["servers"]
                assert (entry["state"], entry["client_id"]) == ("needs_login", None)
                # Every later call waits for the login: no more token requests.
                refreshes = srv.grants["refresh_token"]
                assert (await agent.call(TOOL))["isError"] is True
                assert srv.grants["refresh_token"] == refreshes

                assert (await login(agent, srv))["state"] == "ready"
                assert len(registrations(srv)) == 2
                assert not (await agent.call(TOOL)).get("isError")
                (entry,) = (await agent.result("mcpd/auth/status"))["servers"]
                assert entry["client_id"] == "registered-after-the-loss"


async def test_a_logout_keeps_the_registered_client_unless_asked_to_forget_it(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            config = make_config(
                tmp_path,
                {"t": {"url": srv.mcp_url}},
                state_dir=str(tmp_path / "state"),
                startup_deadline=5.0,
            )
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                await login(agent, srv)
                code, said = await mcpd(daemon.socket_path, "auth", "logout", "t")
                assert code == 0 and said.startswith("t: logged out"), said
                assert "forgotten" not in said
                assert (await login(agent, srv))["state"] == "ready"
                assert len(registrations(srv)) == 1
                # The authorization server lost its clients; nothing has told mcpd yet, and
                # a login with the old client would end at the server's error page.
                srv.client_id = "registered-after-the-loss"
                logout = ("auth", "logout", "--forget-client", "t")
                code, said = await mcpd(daemon.socket_path, *logout)
                assert code == 0 and said.startswith("t: logged out"), said
                assert said.strip().endswith(
                    "the client mcpd registered with its authorization server is forgotten, "
                    "and the next login registers a new one"
                ), said
                code, said = await mcpd(daemon.socket_path, *logout)
                assert (code, said.strip()) == (0, "t: was not logged in")
                assert (await login(agent, srv))["state"] == "ready"
                assert len(registrations(srv)) == 2
                assert not (await agent.call(TOOL)).get("isError")
