"""Revoking a login's tokens for ``mcpd auth logout``: the refresh token first, stopping
at a server that offers no revocation or at the first failure (saying why); and a login
saved for a server no longer configured removed from disk whatever revoking did, never
a file outside the logins' folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from mcpd.local.oauth_store import OAuthStore, StoredLogin
from mcpd.servers.oauth.revoking import forget_unconfigured, revoke
from protocol.oauth import OAuthError, Secret, TokenSet
from transports.errors import TransportError

SERVER: Any = object()
REGISTRATION: Any = object()
POLICY: Any = object()


class Revoker:
    """Stands for the OAuth client: revokes what it is given, in order, until told to
    offer no revocation or to fail at a hint."""

    def __init__(self, offered: bool = True, fail_at: str | None = None, error: Any = None) -> None:
        self.offered = offered
        self.fail_at = fail_at
        self.error = error
        self.asked: list[tuple[str, str]] = []

    async def revoke(
        self, server: Any, reg: Any, token: Secret, hint: str, policy: Any, *, key: Any
    ) -> bool:
        assert (server, reg, policy, key) == (SERVER, REGISTRATION, POLICY, None)
        self.asked.append((hint, token.reveal()))
        if hint == self.fail_at:
            raise self.error
        return self.offered


async def revoked_by(http: Revoker, tokens: TokenSet) -> tuple[list[str], str | None]:
    return await revoke(http, tokens, SERVER, REGISTRATION, POLICY, None)


BOTH = TokenSet(access_token=Secret("at"), refresh_token=Secret("rt"))


async def test_the_refresh_token_is_revoked_first_then_the_access_token() -> None:
    http = Revoker()
    assert await revoked_by(http, BOTH) == (["refresh_token", "access_token"], None)
    assert http.asked == [("refresh_token", "rt"), ("access_token", "at")]


async def test_a_login_without_a_refresh_token_revokes_its_access_token() -> None:
    http = Revoker()
    assert await revoked_by(http, TokenSet(access_token=Secret("at"))) == (["access_token"], None)


async def test_a_server_that_offers_no_revocation_is_asked_once_and_no_problem() -> None:
    http = Revoker(offered=False)
    assert await revoked_by(http, BOTH) == ([], None)
    assert len(http.asked) == 1


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (TransportError("the authorization server did not answer"), "did not answer"),
        (OAuthError("revocation refused: invalid_client"), "invalid_client"),
    ],
)
async def test_a_failure_stops_revoking_and_says_why(error: Exception, said: str) -> None:
    http = Revoker(fail_at="access_token", error=error)
    revoked, problem = await revoked_by(http, BOTH)
    assert revoked == ["refresh_token"]
    assert problem is not None and said in problem


async def test_no_saved_login_is_nothing_to_forget(tmp_path: Path) -> None:
    assert await forget_unconfigured("gone", str(tmp_path)) is None


async def test_a_name_that_reaches_outside_the_logins_folder_is_left_alone(
    tmp_path: Path,
) -> None:
    store = OAuthStore(str(tmp_path))
    await store.save("s", StoredLogin(server_url="https://mcp.example.com/"))
    outside = tmp_path / "victim.json"
    outside.write_text("{}")
    relative = os.path.relpath(outside.with_suffix(""), store.directory)
    assert await forget_unconfigured(relative, str(tmp_path)) is None
    assert outside.exists() and os.path.exists(store.path("s"))


async def test_a_login_with_no_tokens_is_removed_with_nothing_revoked(tmp_path: Path) -> None:
    store = OAuthStore(str(tmp_path))
    await store.save("s", StoredLogin(server_url="https://mcp.example.com/"))
    done = await forget_unconfigured("s", str(tmp_path))
    assert done == {
        "had_tokens": False,
        "revoked": [],
        "problem": None,
        "removed": store.path("s"),
    }
    assert not os.path.exists(store.path("s"))


async def test_a_damaged_login_is_removed_and_the_reason_it_was_not_revoked_told(
    tmp_path: Path,
) -> None:
    store = OAuthStore(str(tmp_path))
    await store.save("s", StoredLogin(server_url="https://mcp.example.com/"))
    with open(store.path("s"), "wb") as f:
        f.write(b"{not json")
    done = await forget_unconfigured("s", str(tmp_path))
    assert done is not None and done["had_tokens"] is True and done["revoked"] == []
    assert done["problem"].startswith("the saved login cannot be read (")
    assert not os.path.exists(store.path("s"))
