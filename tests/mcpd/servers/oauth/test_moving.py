"""A server that names another authorization server than its login's (``moved_away``,
``recheck_step_up``), against a fake world of OAuth endpoints: the metadata re-read,
everything of the old one dropped when it no longer names it, the login saved and the
move logged; nothing done where there is no login or the metadata cannot be read."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mcpd.servers.oauth import LoginRequired
from mcpd.servers.oauth.login import Login
from mcpd.servers.oauth.moving import moved_away, recheck_step_up
from tests.support.oauth.fake import FakeWorld, json_response
from tests.support.oauth.world import Clock, forbidden, log_in, server_auth

OTHER = "https://other-as.example.com"


@pytest.fixture
def world() -> FakeWorld:
    return FakeWorld()


def move(world: FakeWorld) -> None:
    """The server names ``OTHER`` as its authorization server from now on."""
    world.prm = {**world.prm, "authorization_servers": [OTHER]}
    world.extra[("GET", f"{OTHER}/.well-known/oauth-authorization-server")] = lambda request: (
        json_response(
            {**world.metadata, "issuer": OTHER, "authorization_endpoint": f"{OTHER}/authorize"}
        )
    )


async def test_without_a_login_nothing_is_read(tmp_path: Path, world: FakeWorld) -> None:
    auth, _ = server_auth(tmp_path, world, Clock())
    assert await moved_away(auth, None) is None
    assert world.requests == []


async def test_a_server_that_still_names_the_logins_issuer_has_not_moved(
    tmp_path: Path, world: FakeWorld, caplog: pytest.LogCaptureFixture
) -> None:
    auth, _ = server_auth(tmp_path, world, Clock())
    await log_in(Login(auth), world)
    before = len(world.requests)
    with caplog.at_level(logging.INFO, "mcpd.auth"):
        assert await moved_away(auth, None) is None
    assert len(world.requests) > before  # the metadata was read again
    assert auth.creds.issuer == world.issuer
    assert not [m for m in caplog.messages if "moved" in m]


async def test_a_server_that_names_another_drops_the_old_login_and_says_so(
    tmp_path: Path, world: FakeWorld, caplog: pytest.LogCaptureFixture
) -> None:
    auth, _ = server_auth(tmp_path, world, Clock())
    await log_in(Login(auth), world)
    old = auth.creds.issuer
    move(world)
    with caplog.at_level(logging.WARNING, "mcpd.auth"):
        discovery = await moved_away(auth, None)
    assert discovery is not None and discovery.issuer == OTHER
    assert auth.creds.issuer == OTHER
    assert auth.creds.header is None  # the old server's tokens are void here
    assert caplog.messages == [
        f"srv: the server moved from the authorization server {old} to {OTHER}"
    ]
    # Saved: a restart finds the move too.
    restarted, _ = server_auth(tmp_path, world, Clock())
    await restarted.load()
    assert restarted.creds.issuer == OTHER


async def test_metadata_that_cannot_be_read_changes_nothing(
    tmp_path: Path, world: FakeWorld, caplog: pytest.LogCaptureFixture
) -> None:
    auth, http = server_auth(tmp_path, world, Clock())
    await log_in(Login(auth), world)
    move(world)
    http.down = True
    with caplog.at_level(logging.INFO, "mcpd.auth"):
        assert await moved_away(auth, None) is None
    assert auth.creds.issuer == world.issuer
    assert any(
        m.startswith("srv: could not re-read the authorization metadata: ") for m in caplog.messages
    )


async def test_a_step_up_is_rechecked_and_forgotten_once_the_server_moved(
    tmp_path: Path, world: FakeWorld
) -> None:
    auth, _ = server_auth(tmp_path, world, Clock())
    await log_in(Login(auth), world)
    before = len(world.requests)
    await recheck_step_up(auth)
    assert len(world.requests) == before  # no step-up: nothing to recheck
    with pytest.raises(LoginRequired):
        await auth.refused(
            forbidden('Bearer error="insufficient_scope", scope="mcp:admin"'), auth.creds.header
        )
    assert auth.stepping_up()
    move(world)
    await recheck_step_up(auth)
    assert not auth.stepping_up()
    assert auth.creds.issuer == OTHER
