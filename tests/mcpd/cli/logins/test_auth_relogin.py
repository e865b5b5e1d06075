"""``mcpd auth login`` for a server that already holds tokens: a login as the client
they were issued to revokes none of them (their authorization server may end the new
login with them); one as another client (after a re-login whose client was refused)
revokes them once the new login is saved, the refresh token first, as the client they
were issued to, and a revocation that fails leaves the login done and says which tokens
stay valid."""

from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import parse_qs

import trio

from tests.support.clients.agent import Agent, connect, running
from tests.support.http_servers.serving import Responder, SeenRequest
from tests.support.oauth.browser_step import follow_authorization
from tests.support.oauth.login import LIMIT, ROOT, config_for, mcpd
from tests.support.oauth.protected_mcp import REDIRECT, ProtectedMcp, login, serve_protected
from transports.http.oauth_client import OAuthHttp

BROWSER = {
    "BROWSER": f"{sys.executable} {ROOT / 'tests' / 'support' / 'oauth' / 'scripted_browser.py'}"
}


def revocations(srv: ProtectedMcp) -> list[dict[str, list[str]]]:
    sent = [r for r in srv.http.requests if r.target.endswith("/revoke")]
    return [parse_qs(r.body.decode()) for r in sent]


async def whoami(agent: Agent) -> str:
    return str((await agent.call("mcp__t__whoami"))["content"][0]["text"])


async def test_a_relogin_as_the_same_client_revokes_nothing(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with (
            serve_protected() as srv,
            running(config_for(tmp_path, srv)) as daemon,
            connect(daemon.socket_path) as agent,
        ):
            await login(agent, srv)
            code, said = await mcpd(daemon.socket_path, "auth", "login", "t", env=BROWSER)
            called = await whoami(agent)
    assert code == 0, said
    assert said.rstrip().splitlines()[-1] == "t: logged in; ready with 1 tools"
    assert "replaced the earlier login" not in said
    assert revocations(srv) == [] and srv.revoked == []
    assert called == "called with token #2"


async def relogin_as_another_client(agent: Agent, srv: ProtectedMcp) -> str:
    """A re-login whose client the token endpoint refuses (mcpd forgets that client, and
    keeps it only for the tokens it was issued), then ``mcpd auth login``, which
    registers a new client the server knows by now: the first client's id."""
    begun = await agent.result("mcpd/auth/login", {"server": "t", "redirect_uri": REDIRECT})
    http = OAuthHttp()
    redirect = await follow_authorization(http, begun["url"], await http.policy_for(srv.mcp_url))
    first, srv.client_id = srv.client_id, "someone-else"
    done = {"server": "t", "login": begun["login"], "redirect": redirect}
    refused = await agent.rpc("mcpd/auth/complete", done)
    assert "forgot that client" in refused["error"]["message"]
    srv.client_id = "registered-anew"
    return first


async def test_tokens_kept_after_a_refused_relogin_are_revoked_as_their_client(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with (
            serve_protected() as srv,
            running(config_for(tmp_path, srv)) as daemon,
            connect(daemon.socket_path) as agent,
        ):
            await login(agent, srv)
            (refresh,) = srv.live_refresh
            access = srv.issued[-1]
            first = await relogin_as_another_client(agent, srv)
            code, said = await mcpd(daemon.socket_path, "auth", "login", "t", env=BROWSER)
            called = await whoami(agent)
    assert code == 0, said
    assert said.rstrip().splitlines()[-2:] == [
        "t: logged in; ready with 1 tools",
        "t: replaced the earlier login; the server revoked the tokens",
    ]
    assert srv.revoked == [refresh, access]
    sent = revocations(srv)
    assert [form["token_type_hint"] for form in sent] == [["refresh_token"], ["access_token"]]
    assert [form["client_id"] for form in sent] == [[first]] * 2
    (kept,) = srv.live_refresh  # the new login's, which still works
    assert kept != refresh
    assert called == "called with token #2"


class RefusingRevocation(ProtectedMcp):
    """Its revocation endpoint is down."""

    async def __call__(self, req: SeenRequest, respond: Responder) -> None:
        if req.target.endswith("/revoke"):
            await respond.reply(503, "down for maintenance")
            return
        await super().__call__(req, respond)


async def test_a_revocation_that_fails_does_not_fail_the_login_and_is_said(
    tmp_path: Path,
) -> None:
    srv = RefusingRevocation()
    with trio.fail_after(LIMIT):
        async with (
            serve_protected(srv),
            running(config_for(tmp_path, srv)) as daemon,
            connect(daemon.socket_path) as agent,
        ):
            await login(agent, srv)
            (refresh,) = srv.live_refresh
            await relogin_as_another_client(agent, srv)
            code, said = await mcpd(daemon.socket_path, "auth", "login", "t", env=BROWSER)
            called = await whoami(agent)
    assert code == 0, said
    last = said.rstrip().splitlines()[-2:]
    assert last[0] == "t: logged in; ready with 1 tools"
    assert last[1].startswith("t: replaced the earlier login; revoking the tokens failed: ")
    assert "503" in last[1], last[1]
    assert last[1].endswith(
        "; the refresh token and the access token stay valid at the authorization server "
        "until they expire"
    )
    assert refresh in srv.live_refresh and srv.revoked == []
    assert called == "called with token #2"
