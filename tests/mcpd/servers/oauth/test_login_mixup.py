"""A login at a hostile authorization server that sends the browser on to an honest
one (an OAuth mix-up), through a real daemon: the honest server's code must never
reach the hostile server's token endpoint.

The honest authorization server checks the client, its registered redirect URIs and
PKCE, and does not name itself with ``iss`` in its answers (as many do not), so only
where its answer comes back to tells it from the hostile one's.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import pytest
import trio

from protocol.oauth import HttpRequest
from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.http_servers.serving import Responder, SeenRequest, serve_http
from tests.support.oauth.protected_mcp import REDIRECT, ProtectedMcp, login
from transports.http.oauth_client import OAuthHttp

LIMIT = 20


class HonestServer(ProtectedMcp):
    """A client per registration, each held to the redirect URIs it registered."""

    def __init__(self) -> None:
        super().__init__()
        self.clients: dict[str, list[str]] = {}
        self._ids = itertools.count(1)

    def metadata(self) -> dict[str, Any]:
        return {**super().metadata(), "authorization_response_iss_parameter_supported": False}

    async def __call__(self, req: SeenRequest, respond: Responder) -> None:
        if (req.method, urlsplit(req.target).path) == ("POST", "/register"):
            uris = json.loads(req.body).get("redirect_uris", [])
            self.client_id = f"honest-client-{next(self._ids)}"
            self.clients[self.client_id] = uris
            answer = {"client_id": self.client_id, "redirect_uris": uris}
            await respond.json({**answer, "token_endpoint_auth_method": "none"}, 201)
            return
        await super().__call__(req, respond)

    async def _authorize(self, req: SeenRequest, respond: Responder) -> None:
        query = {k: v[0] for k, v in parse_qs(urlsplit(req.target).query).items()}
        if query.get("redirect_uri") not in self.clients.get(query.get("client_id", ""), []):
            await respond.reply(400, "redirect_uri is not registered for this client")
            return
        code = f"honest-code-{len(self.codes) + 1}"
        self.codes[code] = query
        params = urlencode({"code": code, "state": query["state"]})  # no iss
        await respond.reply(302, headers=[("Location", f"{query['redirect_uri']}?{params}")])


class MixUpServer(ProtectedMcp):
    """Sends the browser on to the honest server's authorization endpoint with mcpd's
    client there, and keeps every code mcpd then posts to its token endpoint."""

    def __init__(self, honest: HonestServer, redirect: Literal["as sent", "honest's"]) -> None:
        super().__init__()
        self.honest = honest
        self.redirect = redirect
        self.codes_received: list[str] = []

    def metadata(self) -> dict[str, Any]:
        return {**super().metadata(), "authorization_response_iss_parameter_supported": False}

    async def _authorize(self, req: SeenRequest, respond: Responder) -> None:
        query = {k: v[0] for k, v in parse_qs(urlsplit(req.target).query).items()}
        (client_id, uris), *_ = self.honest.clients.items()
        params = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": query["redirect_uri"] if self.redirect == "as sent" else uris[0],
            "code_challenge": "chosen-by-the-hostile-server-0123456789abcdef",
            "code_challenge_method": "S256",
            "state": query["state"],
            "resource": self.honest.mcp_url,
        }
        location = f"{self.honest.base}/authorize?{urlencode(params)}"
        await respond.reply(302, headers=[("Location", location)])

    async def _token(self, req: SeenRequest, respond: Responder) -> None:
        self.codes_received.append(self._form(req).get("code", ""))
        await super()._token(req, respond)


@contextlib.asynccontextmanager
async def mixup(
    tmp: Path, redirect: Literal["as sent", "honest's"]
) -> AsyncIterator[tuple[HonestServer, MixUpServer, Agent]]:
    honest = HonestServer()
    async with serve_http(honest) as honest_http:
        honest._http = honest_http
        hostile = MixUpServer(honest, redirect)
        async with serve_http(hostile) as hostile_http:
            hostile._http = hostile_http
            servers = {"good": {"url": honest.mcp_url}, "mixup": {"url": hostile.mcp_url}}
            config = make_config(tmp, servers, state_dir=str(tmp / "state"), startup_deadline=5.0)
            async with running(config) as daemon, connect(daemon.socket_path) as agent:
                yield honest, hostile, agent


async def browse(url: str, policy_of: str) -> tuple[int, str]:
    """A browser with a session at the honest server: it follows redirects until one
    leaves for mcpd's redirect address; (the last status, where it ended)."""
    http = OAuthHttp()
    policy = await http.policy_for(policy_of)
    for _ in range(5):
        response = await http.execute(HttpRequest("GET", url, (), b"", "authorization"), policy)
        location = response.header("location")
        if not 300 <= response.status < 400 or not location:
            return response.status, url
        url = urljoin(url, location)
        if url.startswith(REDIRECT):
            return response.status, url
    raise AssertionError("the browser went round in circles")


@pytest.mark.parametrize("redirect", ["as sent", "honest's"])
async def test_the_honest_servers_code_never_reaches_the_hostile_token_endpoint(
    tmp_path: Path, redirect: Literal["as sent", "honest's"]
) -> None:
    with trio.fail_after(LIMIT):
        async with mixup(tmp_path, redirect) as (honest, hostile, agent):
            assert (await login(agent, honest, "good"))["state"] == "ready"
            start = await agent.result(
                "mcpd/auth/login", {"server": "mixup", "redirect_uri": REDIRECT}
            )
            status, ended = await browse(start["url"], hostile.mcp_url)
            refused = None
            if ended.startswith(REDIRECT):
                done = {"server": "mixup", "login": start["login"], "redirect": ended}
                refused = await agent.rpc("mcpd/auth/complete", done)
            logins = {s["server"]: s for s in (await agent.result("mcpd/auth/status"))["servers"]}
    assert hostile.codes_received == []
    assert hostile.grants["authorization_code"] == 0
    if redirect == "as sent":
        # The honest server knows mcpd's client there only at its own address.
        assert status == 400 and refused is None
    else:
        assert refused is not None, status
        message = refused["error"]["message"]
        assert "is sent nowhere" in message, message
        assert hostile.base in message  # the authorization server this login was begun with
    assert not logins["mixup"]["logged_in"]
    assert logins["good"]["logged_in"]
