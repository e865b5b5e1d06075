"""A login that replaces tokens revokes them, the refresh token first, once the new
ones are saved; while the saved file still holds the old ones, they are not revoked,
and it says so."""

from __future__ import annotations

import shutil
from pathlib import Path

from mcpd.servers.oauth.login import Login
from tests.support.oauth_fake import FakeWorld
from tests.support.oauth_world import REDIRECT, Clock, log_in, server_auth


async def relogin(login: Login, world: FakeWorld) -> dict[str, object]:
    world.token = {**world.token, "access_token": "at-2", "refresh_token": "rt-2"}
    begun = await login.begin(REDIRECT)
    assert begun is not None
    url, login_id = begun
    said = await login.finish(login_id, world.authorize(url))
    assert said is not None
    return said.said()


def revoked(world: FakeWorld) -> list[str]:
    sent = world.sent_to(world.metadata["revocation_endpoint"])
    return [world.form(r)["token"] for r in sent]


async def test_a_relogin_revokes_the_tokens_it_replaced_once_saved(tmp_path: Path) -> None:
    world = FakeWorld()
    auth, _ = server_auth(tmp_path, world, Clock())
    login = Login(auth)
    await log_in(login, world)
    said = await relogin(login, world)
    assert said == {
        "revoked": ["refresh_token", "access_token"],
        "not_revocable": [],
        "problem": None,
        "unrevoked": [],
    }
    assert revoked(world) == ["rt-1", "at-1"]
    assert await auth.authorization() == "Bearer at-2"


async def test_tokens_the_saved_file_still_holds_are_not_revoked(tmp_path: Path) -> None:
    world = FakeWorld()
    state = tmp_path / "state"
    auth, _ = server_auth(state, world, Clock())
    login = Login(auth)
    await log_in(login, world)
    shutil.rmtree(state)
    state.write_text("")  # nothing can be saved there now
    said = await relogin(login, world)
    assert said == {
        "revoked": [],
        "not_revocable": [],
        "problem": "the new login could not be saved, so the saved file still holds them",
        "unrevoked": ["refresh_token", "access_token"],
    }
    assert revoked(world) == []
    assert await auth.authorization() == "Bearer at-2"  # used all the same, from memory


async def test_no_revocation_offered_leaves_nothing_to_do(tmp_path: Path) -> None:
    world = FakeWorld()
    del world.metadata["revocation_endpoint"]
    auth, _ = server_auth(tmp_path, world, Clock())
    login = Login(auth)
    await log_in(login, world)
    said = await relogin(login, world)
    assert said == {"revoked": [], "not_revocable": [], "problem": None, "unrevoked": []}
