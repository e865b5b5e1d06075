"""A login the authorization server refuses with a bare ``access_denied`` after mcpd
asked for no scope (the server named none): the refusal names the setting that says
what to ask for; one to a login that named scopes, or that says why, is left as it is."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from mcpd.servers.oauth import RedirectFailed
from mcpd.servers.oauth.login import Login
from tests.support.oauth.fake import FakeWorld
from tests.support.oauth.world import REDIRECT, Clock, server_auth

ADVICE = "name the scopes to ask for in `scopes` under [servers.srv.auth]"


@pytest.fixture
def clock() -> Clock:
    return Clock()


async def refused(tmp_path: Path, world: FakeWorld, clock: Clock, **answer: str) -> str:
    """Why a login was refused with ``answer`` (its error and description)."""
    auth, _ = server_auth(tmp_path, world, clock)
    login = Login(auth)
    begun = await login.begin(REDIRECT)
    assert begun is not None
    url, login_id = begun
    asked = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    params = {**answer, "state": asked["state"], "iss": world.issuer}
    with pytest.raises(RedirectFailed) as caught:
        await login.finish(login_id, f"{asked['redirect_uri']}?{urlencode(params)}")
    assert login.pending
    return str(caught.value)


async def test_a_bare_access_denied_to_a_login_that_named_no_scope_names_the_setting(
    tmp_path: Path, clock: Clock
) -> None:
    said = await refused(tmp_path, FakeWorld(), clock, error="access_denied")
    assert said == (
        "that redirect did not log in: the authorization server refused the authorization "
        '("access_denied"); mcpd asked for no scope, since the server named none; if the '
        "authorization server grants nothing to such a login, name the scopes to ask for in "
        "`scopes` under [servers.srv.auth] (see docs/configuration.md)"
    )


async def test_an_access_denied_that_says_why_or_to_named_scopes_is_left_as_it_is(
    tmp_path: Path, clock: Clock
) -> None:
    said = await refused(
        tmp_path, FakeWorld(), clock, error="access_denied", error_description="user declined"
    )
    assert ADVICE not in said
    scoped = FakeWorld()
    scoped.prm["scopes_supported"] = ["mcp:tools"]
    assert ADVICE not in await refused(tmp_path, scoped, clock, error="access_denied")
