"""A login as the client the tokens it replaces were issued to revokes nothing (their
authorization server may end the new login with them); one as another client revokes
them, the refresh token first, as the client they were issued to, once the new ones
are saved: while the saved file still holds the old ones, they are not revoked, and
it says so."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec

from mcpd.servers.oauth.auth import ServerAuth
from mcpd.servers.oauth.login import Login
from mcpd.servers.oauth.revoking import Revocation
from tests.support.oauth.fake import FakeWorld
from tests.support.oauth.world import REDIRECT, Clock, log_in, server_auth


async def relogin(login: Login, world: FakeWorld) -> Revocation | None:
    world.token = {**world.token, "access_token": "at-2", "refresh_token": "rt-2"}
    begun = await login.begin(REDIRECT)
    assert begun is not None
    url, login_id = begun
    return await login.finish(login_id, world.authorize(url))


async def relogin_as_another_client(auth: ServerAuth, world: FakeWorld) -> object:
    """A re-login after the client the tokens were issued to was forgotten (as when
    the authorization server refused it): the new login registers another."""
    assert auth.creds.forget_registered_client() == "dyn-client"
    world.registration = {"client_id": "dyn-client-2"}
    said = await relogin(Login(auth), world)
    assert said is not None
    return msgspec.to_builtins(said.said())


def revocations(world: FakeWorld) -> list[dict[str, str]]:
    return [world.form(r) for r in world.sent_to(world.metadata["revocation_endpoint"])]


async def test_a_relogin_as_the_same_client_revokes_nothing(tmp_path: Path) -> None:
    world = FakeWorld()
    auth, _ = server_auth(tmp_path, world, Clock())
    login = Login(auth)
    await log_in(login, world)
    assert await relogin(login, world) is None
    assert revocations(world) == []
    assert await auth.authorization() == "Bearer at-2"


async def test_a_relogin_as_another_client_revokes_the_tokens_it_replaced_once_saved(
    tmp_path: Path,
) -> None:
    world = FakeWorld()
    auth, _ = server_auth(tmp_path, world, Clock())
    await log_in(Login(auth), world)
    said = await relogin_as_another_client(auth, world)
    assert said == {
        "revoked": ["refresh_token", "access_token"],
        "not_revocable": [],
        "problem": None,
        "unrevoked": [],
    }
    sent = revocations(world)
    assert [form["token"] for form in sent] == ["rt-1", "at-1"]
    assert [form["client_id"] for form in sent] == ["dyn-client"] * 2
    assert await auth.authorization() == "Bearer at-2"


async def test_tokens_the_saved_file_still_holds_are_not_revoked(tmp_path: Path) -> None:
    world = FakeWorld()
    state = tmp_path / "state"
    auth, _ = server_auth(state, world, Clock())
    await log_in(Login(auth), world)
    shutil.rmtree(state)
    state.write_text("")  # nothing can be saved there now
    said = await relogin_as_another_client(auth, world)
    assert said == {
        "revoked": [],
        "not_revocable": [],
        "problem": "the new login could not be saved, so the saved file still holds them",
        "unrevoked": ["refresh_token", "access_token"],
    }
    assert revocations(world) == []
    assert await auth.authorization() == "Bearer at-2"  # used all the same, from memory


async def test_no_revocation_offered_leaves_nothing_to_do(tmp_path: Path) -> None:
    world = FakeWorld()
    del world.metadata["revocation_endpoint"]
    auth, _ = server_auth(tmp_path, world, Clock())
    await log_in(Login(auth), world)
    said = await relogin_as_another_client(auth, world)
    assert said == {"revoked": [], "not_revocable": [], "problem": None, "unrevoked": []}
