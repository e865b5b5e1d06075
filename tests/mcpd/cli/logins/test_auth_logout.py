"""``mcpd auth logout`` says what the authorization server revoked: a server that does
not revoke access tokens (RFC 7009 ``unsupported_token_type``, as for self-contained
ones) has not failed the logout once it revoked the refresh token. A login kept after a
later login's code exchange was refused for its client is still refreshed and revoked
as the client it was issued to, and what is left valid when revoking fails is named."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs

import trio

from mcpd.cli.logins.revocation_words import logout_said
from mcpd.login_answers import LoggedOut
from tests.support.clients.agent import connect, running
from tests.support.oauth.browser_step import follow_authorization
from tests.support.oauth.login import LIMIT, config_for, mcpd
from tests.support.oauth.protected_mcp import REDIRECT, login, serve_protected
from transports.http.oauth_client import OAuthHttp


async def test_an_access_token_the_server_does_not_revoke_is_no_failure(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with (
            serve_protected() as srv,
            running(config_for(tmp_path, srv)) as daemon,
            connect(daemon.socket_path) as agent,
        ):
            srv.unrevocable_access = True
            await login(agent, srv)
            (refresh,) = srv.live_refresh
            code, said = await mcpd(daemon.socket_path, "auth", "logout", "t")
    assert (code, said.strip()) == (
        0,
        "t: logged out; the server revoked the refresh token (the server does not revoke "
        "the access token, which ends when it expires)",
    )
    assert srv.revoked == [refresh]


async def test_a_login_kept_after_a_refused_relogin_is_revoked_at_logout(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with (
            serve_protected() as srv,
            running(config_for(tmp_path, srv)) as daemon,
            connect(daemon.socket_path) as agent,
        ):
            await login(agent, srv)
            (refresh,) = srv.live_refresh
            access = srv.issued[-1]
            begun = await agent.result("mcpd/auth/login", {"server": "t", "redirect_uri": REDIRECT})
            http = OAuthHttp()
            redirect = await follow_authorization(
                http, begun["url"], await http.policy_for(srv.mcp_url)
            )
            # The token endpoint refuses the client this once, as a passing fault would.
            registered, srv.client_id = srv.client_id, "someone-else"
            done = {"server": "t", "login": begun["login"], "redirect": redirect}
            refused = await agent.rpc("mcpd/auth/complete", done)
            srv.client_id = registered
            assert "forgot that client" in refused["error"]["message"]
            _, status = await mcpd(daemon.socket_path, "auth", "status")
            code, said = await mcpd(daemon.socket_path, "auth", "logout", "t")
    row = next(line for line in status.splitlines() if line.startswith("t "))
    assert "(r)" in row and "refresh token" not in status, status
    assert (code, said.strip()) == (0, "t: logged out; the server revoked the tokens")
    assert srv.revoked == [refresh, access]
    sent = [r for r in srv.http.requests if r.target.endswith("/revoke")]
    assert [parse_qs(r.body.decode())["client_id"] for r in sent] == [[registered]] * 2
    assert not srv.live_refresh


def test_a_revocation_cut_short_says_what_was_revoked_before() -> None:
    said = logout_said(
        LoggedOut(
            server="t",
            had_tokens=True,
            revoked=["refresh_token"],
            not_revocable=[],
            problem="token revocation was refused (HTTP 500)",
            unrevoked=["access_token"],
        )
    )
    assert said == (
        "logged out; the server revoked the refresh token, but revoking the rest failed: "
        "token revocation was refused (HTTP 500); the access token stays valid at the "
        "authorization server until it expires"
    )


def test_tokens_that_could_not_be_revoked_are_named_as_still_valid() -> None:
    said = logout_said(
        LoggedOut(
            server="t",
            had_tokens=True,
            revoked=[],
            not_revocable=[],
            problem="mcpd no longer has the client they were issued to, which revoking them needs",
            unrevoked=["refresh_token", "access_token"],
        )
    )
    assert said == (
        "logged out; revoking the tokens failed: mcpd no longer has the client they were "
        "issued to, which revoking them needs; the refresh token and the access token stay "
        "valid at the authorization server until they expire"
    )
