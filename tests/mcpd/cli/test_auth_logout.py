"""``mcpd auth logout`` says what the authorization server revoked: a server that does
not revoke access tokens (RFC 7009 ``unsupported_token_type``, as for self-contained
ones) has not failed the logout once it revoked the refresh token."""

from __future__ import annotations

from pathlib import Path

import trio

from mcpd.cli.auth import logout_said
from tests.support.agent import connect, running
from tests.support.auth_login import LIMIT, config_for, mcpd
from tests.support.oauth_mcp import login, serve_protected


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


def test_a_revocation_cut_short_says_what_was_revoked_before() -> None:
    said = logout_said(
        {
            "had_tokens": True,
            "revoked": ["refresh_token"],
            "not_revocable": [],
            "problem": "token revocation was refused (HTTP 500)",
        }
    )
    assert said == (
        "logged out; the server revoked the refresh token, but revoking the rest failed: "
        "token revocation was refused (HTTP 500)"
    )
