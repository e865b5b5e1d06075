"""The scopes a login asks for around a step-up (a 403 ``insufficient_scope`` naming
only the scope it lacks): the step-up's login asks for what the server needed before
too, also when mcpd restarted since; a logout forgets what the 403 asked for, so the
next login starts from the configured or the resource metadata's scopes again, and so
does the first login at another authorization server the server moved to."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from mcpd.servers.oauth import LoginRequired
from mcpd.servers.oauth.login import Login
from tests.support.oauth.fake import FakeWorld, json_response
from tests.support.oauth.world import (
    REDIRECT,
    Clock,
    forbidden,
    log_in,
    server_auth,
    unauthorized,
)

ADMIN = forbidden('Bearer error="insufficient_scope", scope="mcp:admin"')


@pytest.fixture
def world() -> FakeWorld:
    world = FakeWorld()
    world.prm["scopes_supported"] = ["mcp:tools"]
    return world


@pytest.fixture
def clock() -> Clock:
    return Clock()


async def asked(login: Login) -> list[str]:
    """The scopes the next login's authorization request names."""
    begun = await login.begin(REDIRECT)
    assert begun is not None
    return parse_qs(urlsplit(begun[0]).query)["scope"][0].split()


async def stepped_up(login: Login) -> None:
    with pytest.raises(LoginRequired):
        await login.auth.refused(ADMIN, login.auth.creds.header)


async def test_a_logout_after_a_step_up_starts_the_next_login_from_the_base_scopes(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = server_auth(tmp_path, world, clock)
    login = Login(auth)
    await log_in(login, world)
    assert world.authorize_queries[-1]["scope"] == "mcp:tools"
    await stepped_up(login)
    await log_in(login, world)
    assert world.authorize_queries[-1]["scope"] == "mcp:tools mcp:admin"
    await login.logout()
    assert await asked(login) == ["mcp:tools"]


async def test_a_step_up_after_a_restart_keeps_the_scopes_of_the_saved_login(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = server_auth(tmp_path, world, clock)
    await log_in(Login(auth), world)
    restarted, _ = server_auth(tmp_path, world, clock)
    await restarted.load()
    login = Login(restarted)
    await stepped_up(login)
    assert await asked(login) == ["mcp:tools", "mcp:admin"]


async def test_a_login_that_could_not_start_after_a_step_up_still_asks_for_the_base(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, http = server_auth(tmp_path, world, clock)
    login = Login(auth)
    await log_in(login, world)
    await stepped_up(login)
    http.down = True
    with pytest.raises(Exception, match="connection refused"):
        await login.begin(REDIRECT)
    http.down = False
    assert await asked(login) == ["mcp:tools", "mcp:admin"]


async def test_a_login_at_the_authorization_server_moved_to_asks_for_its_own_scopes(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = server_auth(tmp_path, world, clock)
    login = Login(auth)
    await log_in(login, world)
    await stepped_up(login)
    other = "https://other-as.example.com"
    world.prm = {**world.prm, "authorization_servers": [other], "scopes_supported": ["as2:tools"]}
    world.extra[("GET", f"{other}/.well-known/oauth-authorization-server")] = lambda request: (
        json_response(
            {**world.metadata, "issuer": other, "authorization_endpoint": f"{other}/authorize"}
        )
    )
    with pytest.raises(LoginRequired):
        await auth.refused(
            unauthorized(f'Bearer resource_metadata="{world.prm_url}"'), auth.creds.header
        )
    assert await asked(login) == ["as2:tools"]
