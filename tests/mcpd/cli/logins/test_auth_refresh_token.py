"""A login whose authorization server is an OpenID provider: asking for
``offline_access`` with ``prompt=consent`` gets the refresh token that keeps the login
alive, and a login that got none says at the terminal, and in ``mcpd auth status``,
that it lasts only as long as its access token."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from tests.support.clients.agent import running
from tests.support.oauth.login import LIMIT, ROOT, config_for, mcpd
from tests.support.oauth.protected_mcp import ProtectedMcp, serve_protected

BROWSER = {
    "BROWSER": f"{sys.executable} {ROOT / 'tests' / 'support' / 'oauth' / 'scripted_browser.py'}"
}
NO_REFRESH = "the authorization server issued no refresh token"


async def logged_in(tmp_path: Path, srv: ProtectedMcp) -> tuple[str, dict[str, object], str]:
    """What ``mcpd auth login t`` printed, then the login's status as JSON and as text."""
    async with running(config_for(tmp_path, srv)) as daemon:
        sock = daemon.socket_path
        code, login = await mcpd(sock, "auth", "login", "t", env=BROWSER)
        assert code == 0, login
        code, said = await mcpd(sock, "auth", "status", "--json")
        (entry,) = json.loads(said)["servers"]
        code, text = await mcpd(sock, "auth", "status")
    return login, entry, text


async def test_offline_access_is_asked_with_consent_and_brings_a_refresh_token(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            srv.refresh_needs_consent = True
            srv.scopes_supported = ["mcp:tools", "offline_access"]
            srv.challenge_scope = "mcp:tools"
            login, entry, text = await logged_in(tmp_path, srv)
    (asked,) = srv.codes_asked
    assert (asked["scope"], asked["prompt"]) == ("mcp:tools offline_access", "consent")
    assert entry["refreshable"] is True
    assert NO_REFRESH not in login and "no refresh token" not in text


async def test_a_login_without_a_refresh_token_says_it_ends_with_its_access_token(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv:
            srv.refresh_needs_consent = True  # and mcpd asks for no offline_access
            login, entry, text = await logged_in(tmp_path, srv)
    (asked,) = srv.codes_asked
    assert "prompt" not in asked
    assert entry["refreshable"] is False
    assert f"t: {NO_REFRESH}, so this login lasts only as long as its access token (until " in (
        login
    )
    assert "then run `mcpd auth login t` again" in login
    assert login.rstrip().endswith("t: logged in; ready with 1 tools")
    assert "no refresh token: a new login is needed once it expires" in text
