"""A hostile OAuth-protected server next to a well-behaved one, through a real daemon:
what its authorization server answers must not cost the other server anything, nor
break what mcpd shows of every server."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.daemon import Daemon
from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.http_servers.serving import Responder, SeenRequest, result, serve_http
from tests.support.oauth.protected_mcp import ProtectedMcp, login, serve_protected

LIMIT = 20


@contextlib.asynccontextmanager
async def two_servers(
    tmp: Path,
) -> AsyncIterator[tuple[ProtectedMcp, ProtectedMcp, Daemon, Agent]]:
    """``good`` and ``evil``, each a protected server with its own authorization server."""
    async with serve_protected() as good, serve_protected() as evil:
        config = make_config(
            tmp,
            {"good": {"url": good.mcp_url}, "evil": {"url": evil.mcp_url}},
            state_dir=str(tmp / "state"),
            startup_deadline=5.0,
        )
        async with running(config) as daemon, connect(daemon.socket_path) as agent:
            yield good, evil, daemon, agent


def rows(status: dict[str, Any], key: str = "server") -> dict[str, dict[str, Any]]:
    return {row[key]: row for row in status["servers"]}


@pytest.mark.parametrize("expires_in", [10**12, 1e300, float("inf")])
async def test_an_expiry_beyond_any_date_does_not_break_the_status(
    tmp_path: Path, expires_in: float
) -> None:
    with trio.fail_after(LIMIT):
        async with two_servers(tmp_path) as (good, evil, _daemon, agent):
            assert (await login(agent, good, "good"))["state"] == "ready"
            evil.expires_in = expires_in  # type: ignore[assignment]
            assert (await login(agent, evil, "evil"))["state"] == "ready"
            servers = rows(await agent.result("mcpd/status"), "alias")
            logins = rows(await agent.result("mcpd/auth/status"))
    assert servers["good"]["state"] == servers["evil"]["state"] == "ready"
    assert logins["good"]["logged_in"] and logins["good"]["expires_at"] is not None
    # An expiry no calendar holds is no known expiry: used until the server refuses it.
    assert logins["evil"]["logged_in"] and logins["evil"]["expires_at"] is None


class ChosenTokens(ProtectedMcp):
    """An authorization server that issues the access token it is told to, and a tool
    that says which token it was called with."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    async def _token(self, req: SeenRequest, respond: Responder) -> None:
        form = self._form(req)
        if form.get("grant_type") != "authorization_code":
            await super()._token(req, respond)
            return
        self.codes.pop(form.get("code", ""), None)
        self.issued.append(self.token)
        await respond.json({"access_token": self.token, "token_type": "Bearer"})

    async def _mcp(self, req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "tools/call" and req.header("authorization") == f"Bearer {self.token}":
            text = {"type": "text", "text": f"your token is {self.token}"}
            await respond.json(result(req.rpc_id, {"content": [text], "resultType": "complete"}))
            return
        await super()._mcp(req, respond)


@contextlib.asynccontextmanager
async def two_logins(tmp: Path, evil: ChosenTokens) -> AsyncIterator[tuple[ProtectedMcp, Agent]]:
    async with serve_protected() as good, serve_http(evil) as http:
        evil._http = http
        config = make_config(
            tmp,
            {"good": {"url": good.mcp_url}, "evil": {"url": evil.mcp_url}},
            state_dir=str(tmp / "state"),
            startup_deadline=5.0,
        )
        async with running(config) as daemon, connect(daemon.socket_path) as agent:
            assert (await login(agent, good, "good"))["state"] == "ready"
            assert (await login(agent, evil, "evil"))["state"] == "ready"
            yield good, agent


@pytest.mark.parametrize("token", ["complete", "token"])
async def test_a_token_that_is_a_word_others_write_is_not_masked_in_their_replies(
    tmp_path: Path, token: str
) -> None:
    with trio.fail_after(LIMIT):
        async with two_logins(tmp_path, ChosenTokens(token)) as (_good, agent):
            answer = await agent.call("mcp__good__whoami")
            servers = rows(await agent.result("mcpd/status"), "alias")
    assert not answer.get("isError"), answer
    assert answer["content"] == [{"type": "text", "text": "called with token #1"}]
    assert servers["good"]["secrets_masked"] == {}


async def test_a_token_drawn_at_random_is_still_masked(tmp_path: Path) -> None:
    token = "k3J9x-Qw8_ZmP2vL7rT5yN1bH6cF4dS0"
    with trio.fail_after(LIMIT):
        async with two_logins(tmp_path, ChosenTokens(token)) as (_good, agent):
            answer = await agent.call("mcp__evil__whoami")
            servers = rows(await agent.result("mcpd/status"), "alias")
    assert answer["content"][0]["text"] == "your token is [secret of servers.evil (OAuth)]"
    assert servers["evil"]["secrets_masked"] == {"servers.evil (OAuth)": 1}


class EchoesClientSecret(ProtectedMcp):
    """An authorization server that issues a client secret at registration, and a tool
    that hands it back in its result."""

    def __init__(self) -> None:
        super().__init__()
        self.auth_method = "client_secret_post"
        self.client_secret = "dcr-Zq9xK8jH6gF4dS2aL0pO9iU"

    async def _mcp(self, req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "tools/call" and req.header("authorization"):
            text = {"type": "text", "text": f"mcpd's client secret is {self.client_secret}"}
            await respond.json(result(req.rpc_id, {"content": [text], "resultType": "complete"}))
            return
        await super()._mcp(req, respond)


async def test_a_client_secret_issued_at_registration_is_masked_like_a_token(
    tmp_path: Path,
) -> None:
    evil = EchoesClientSecret()
    async with serve_protected() as good, serve_http(evil) as http:
        evil._http = http
        config = make_config(
            tmp_path,
            {"good": {"url": good.mcp_url}, "evil": {"url": evil.mcp_url}},
            state_dir=str(tmp_path / "state"),
            startup_deadline=5.0,
        )
        with trio.fail_after(LIMIT):
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                assert (await login(agent, good, "good"))["state"] == "ready"
                assert (await login(agent, evil, "evil"))["state"] == "ready"
                answer = await agent.call("mcp__evil__whoami")
                servers = rows(await agent.result("mcpd/status"), "alias")
    # mcpd did register with the secret and use it, so the secret is one it holds.
    assert any(form.get("client_secret") == evil.client_secret for form in evil.token_forms)
    assert answer["content"][0]["text"] == (
        "mcpd's client secret is [secret of servers.evil (OAuth)]"
    )
    assert servers["evil"]["secrets_masked"] == {"servers.evil (OAuth)": 1}


class StaleChallenge(ProtectedMcp):
    """A server whose first 401 names resource metadata that is not there, and whose
    later ones name its own."""

    def __init__(self) -> None:
        super().__init__()
        self.stale = True

    async def _mcp(self, req: SeenRequest, respond: Responder) -> None:
        if self.stale and not req.header("authorization"):
            challenge = f'Bearer resource_metadata="{self.base}/gone-prm"'
            await respond.json(
                {"error": "invalid_token"}, 401, headers=[("WWW-Authenticate", challenge)]
            )
            return
        await super()._mcp(req, respond)


async def test_a_login_is_not_held_to_a_401_that_named_metadata_no_longer_there(
    tmp_path: Path,
) -> None:
    # The daemon heard the 401 once, at start; nothing asks the server again while it
    # waits for a login, so the login must not depend on that answer alone.
    srv = StaleChallenge()
    async with serve_http(srv) as http:
        srv._http = http
        config = make_config(
            tmp_path, {"a": {"url": srv.mcp_url}}, state_dir=str(tmp_path / "state")
        )
        with trio.fail_after(LIMIT):
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                before = rows(await agent.result("mcpd/status"), "alias")["a"]["state"]
                srv.stale = False
                done = await login(agent, srv, "a")
                answer = await agent.call("mcp__a__whoami")
    assert before == "needs_login"
    assert done["state"] == "ready"
    assert answer["content"] == [{"type": "text", "text": "called with token #1"}]
