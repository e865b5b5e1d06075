"""``mcpd auth login`` as a person reads it (a real process against a daemon whose
server wants a login): the address it asks them to open, shown so that it cannot
pass for another, and what it says when no redirect came back."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.support.clients.agent import running
from tests.support.oauth.login import LIMIT, config_for, mcpd
from tests.support.oauth.protected_mcp import serve_protected


async def test_an_address_whose_host_is_written_with_non_ascii_letters_is_shown_in_ascii(
    tmp_path: Path,
) -> None:
    """The authorization server names a login page at "accounts.google.com" with a
    Cyrillic first letter: the person is shown the name DNS is asked for, and told why."""
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv, running(config_for(tmp_path, srv)) as daemon:
            endpoint = "https://\u0430ccounts.google.com/o/oauth2/v2/auth"
            srv.metadata_extra = {"authorization_endpoint": endpoint}
            argv = ("auth", "login", "t", "--no-browser", "--timeout", "0.5")
            code, said = await mcpd(daemon.socket_path, *argv)
    assert code == 1
    assert "\u0430" not in said
    lines = [line.strip() for line in said.splitlines()]
    shown = next(line for line in lines if line.startswith("https://"))
    assert shown.startswith("https://xn--ccounts-1fg.google.com/o/oauth2/v2/auth?")
    assert "written with non-ASCII letters" in said


async def test_a_login_that_saw_no_redirect_names_the_logout_that_forgets_the_client(
    tmp_path: Path,
) -> None:
    """An authorization server that no longer knows mcpd's client shows a page of its
    own and never redirects: the person is told how to have the next login register anew,
    and that the command told works as written."""
    with trio.fail_after(LIMIT):
        async with serve_protected() as srv, running(config_for(tmp_path, srv)) as daemon:
            argv = ("auth", "login", "t", "--no-browser", "--timeout", "0.5")
            code, said = await mcpd(daemon.socket_path, *argv)
            assert code == 1
            told = "`mcpd auth logout --forget-client t`"
            assert "no redirect came back within 0.5 s" in said and told in said, said
            code, out = await mcpd(daemon.socket_path, "auth", "logout", "--forget-client", "t")
            assert code == 0, out
