"""A person's login in its two halves, and logging out: only the browser's own redirect
for the latest login, within its time, ends it; a redirect that is not it leaves the
login waiting; logging out revokes and forgets, and holds the server for a login."""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import msgspec
import pytest
import trio
import trio.testing

from mcpd.servers.oauth import LoginError, NoOAuthLogin, RedirectFailed
from mcpd.servers.oauth.login import LOGIN_TTL, Login
from protocol.oauth import HttpResponse, redirect_for_issuer
from tests.support.oauth.fake import FakeWorld
from tests.support.oauth.world import REDIRECT, Clock, WorldHttp, log_in, public, server_auth


@pytest.fixture
def world() -> FakeWorld:
    return FakeWorld()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def login_for(tmp_path: Path, world: FakeWorld, clock: Clock) -> tuple[Login, WorldHttp]:
    auth, http = server_auth(tmp_path, world, clock)
    return Login(auth), http


async def begun(login: Login) -> tuple[str, str]:
    out = await login.begin(REDIRECT)
    assert out is not None
    return out


def query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def token_requests(world: FakeWorld) -> int:
    return len(world.sent_to(world.metadata["token_endpoint"]))


async def test_a_login_asks_the_browser_with_pkce_and_its_tokens_are_then_used(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login, _ = login_for(tmp_path, world, clock)
    url, login_id = await begun(login)
    asked = query(url)
    assert url.startswith(world.metadata["authorization_endpoint"])
    assert asked["redirect_uri"] == redirect_for_issuer(REDIRECT, world.issuer)
    assert asked["code_challenge_method"] == "S256"
    assert login.pending and login.status().login_pending is True
    await login.finish(login_id, world.authorize(url))
    assert not login.pending
    assert await login.auth.authorization() == "Bearer at-1"
    assert login.status().state == "logged_in"


async def test_a_client_registered_for_the_redirect_every_server_shared_is_registered_again(
    tmp_path: Path, world: FakeWorld, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    login, _ = login_for(tmp_path, world, clock)
    await log_in(login, world)
    entry = login.auth.creds.record.issuers[world.issuer]
    assert entry.registration is not None
    entry.registration = msgspec.structs.replace(
        entry.registration, client_id="shared-redirect-client", redirect_uris=(REDIRECT,)
    )
    with caplog.at_level(logging.INFO, logger="mcpd.auth"):
        url, login_id = await begun(login)
    assert query(url)["client_id"] == "dyn-client"
    (said,) = [r.getMessage() for r in caplog.records if "registers a new client" in r.getMessage()]
    assert world.issuer in said and REDIRECT in said
    await login.finish(login_id, world.authorize(url))
    kept = login.auth.creds.registration()
    assert kept is not None and kept.redirect_uris == (redirect_for_issuer(REDIRECT, world.issuer),)


async def test_a_client_for_the_shared_redirect_is_kept_where_none_can_be_registered(
    tmp_path: Path, world: FakeWorld, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    login, _ = login_for(tmp_path, world, clock)
    await log_in(login, world)
    entry = login.auth.creds.record.issuers[world.issuer]
    assert entry.registration is not None
    entry.registration = msgspec.structs.replace(
        entry.registration, client_id="shared-redirect-client", redirect_uris=(REDIRECT,)
    )
    del world.metadata["registration_endpoint"]
    with caplog.at_level(logging.INFO, logger="mcpd.auth"):
        for _ in range(2):
            url, login_id = await begun(login)
            assert query(url)["client_id"] == "shared-redirect-client"
            assert query(url)["redirect_uri"] == REDIRECT
            await login.finish(login_id, world.authorize(url))
    said = [r.getMessage() for r in caplog.records if "share" in r.getMessage()]
    assert len(said) == 1 and world.issuer in said[0] and REDIRECT in said[0]
    assert login.status().state == "logged_in"


async def test_an_access_token_that_cannot_be_sent_fails_the_login_and_nothing_is_kept(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login, _ = login_for(tmp_path, world, clock)
    world.token = {**world.token, "access_token": "caf\u00e9 token"}
    url, login_id = await begun(login)
    with pytest.raises(LoginError, match=r"invalid token response.*b64token"):
        await login.finish(login_id, world.authorize(url))
    assert login.auth.creds.tokens is None
    assert login.status().state != "logged_in"
    assert all(
        "caf" not in f.read_text(errors="replace") for f in tmp_path.rglob("*") if f.is_file()
    )


async def test_a_login_ends_the_wait_for_one(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login, _ = login_for(tmp_path, world, clock)
    login.auth.lost("the server asks for a login")
    woken = trio.Event()

    async def waiter() -> None:
        await login.auth.wait_changed()
        woken.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        await log_in(login, world)
    assert woken.is_set() and login.auth.needs_login is None


async def test_a_login_needs_a_redirect_uri(tmp_path: Path, world: FakeWorld, clock: Clock) -> None:
    login, _ = login_for(tmp_path, world, clock)
    with pytest.raises(LoginError, match="needs a redirect URI"):
        await login.begin(None)
    assert world.requests == []


async def test_a_redirect_without_the_logins_state_leaves_it_waiting(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    # Anyone who reaches the loopback port can send a redirect: it must not cost the
    # person their login, nor be exchanged.
    login, _ = login_for(tmp_path, world, clock)
    url, login_id = await begun(login)
    for forged in (
        f"{REDIRECT}?code=evil",
        f"{REDIRECT}?code=evil&state=guessed",
        f"{REDIRECT}?code=evil&state=",
        "not a url at all",
    ):
        with pytest.raises(RedirectFailed, match="does not carry this login's state"):
            await login.finish(login_id, forged)
    assert token_requests(world) == 0
    await login.finish(login_id, world.authorize(url))
    assert await login.auth.authorization() == "Bearer at-1"


async def test_a_redirect_from_the_wrong_issuer_is_refused_and_the_login_waits_on(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login, _ = login_for(tmp_path, world, clock)
    url, login_id = await begun(login)
    world.iss_mode = "wrong"
    with pytest.raises(RedirectFailed, match="did not log in"):
        await login.finish(login_id, world.authorize(url))
    assert token_requests(world) == 0
    world.iss_mode = "correct"
    await login.finish(login_id, world.authorize(url))
    assert login.auth.creds.header == "Bearer at-1"


async def test_a_refused_code_leaves_the_login_waiting_for_another_redirect(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login, _ = login_for(tmp_path, world, clock)
    url, login_id = await begun(login)
    world.token_status = 400
    saved = world.token
    world.token = {"error": "invalid_grant", "error_description": "code already used"}
    with pytest.raises(RedirectFailed) as caught:
        await login.finish(login_id, world.authorize(url))
    assert "code already used" in str(caught.value)
    assert login.pending
    world.token_status, world.token = 200, saved
    await login.finish(login_id, world.authorize(url))
    assert login.auth.creds.header == "Bearer at-1"


async def test_a_person_who_refused_in_the_browser_is_told_and_may_try_again(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login, _ = login_for(tmp_path, world, clock)
    url, login_id = await begun(login)
    state = query(url)["state"]
    denied = f"{REDIRECT}?" + urlencode(
        {"error": "access_denied", "state": state, "iss": world.issuer}
    )
    with pytest.raises(RedirectFailed):
        await login.finish(login_id, denied)
    assert login.pending and token_requests(world) == 0


async def test_only_the_latest_login_within_its_time_can_finish(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login, _ = login_for(tmp_path, world, clock)
    old_url, old_id = await begun(login)
    url, login_id = await begun(login)
    assert old_id != login_id
    with pytest.raises(LoginError, match="no longer waiting"):
        await login.finish(old_id, world.authorize(old_url))
    with pytest.raises(LoginError, match="no longer waiting"):
        await login.finish("é" + login_id, world.authorize(url))
    clock.now += LOGIN_TTL + 1
    with pytest.raises(LoginError, match="no longer waiting") as caught:
        await login.finish(login_id, world.authorize(url))
    assert "mcpd auth login srv" in str(caught.value)
    assert token_requests(world) == 0


async def test_a_server_without_oauth_metadata_says_to_give_it_a_header(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    world.prm_url = None
    world.metadata_url = "https://nowhere.example.com/"
    world.extra[("POST", "https://mcp.example.com/register")] = lambda r: HttpResponse(404)
    login, _ = login_for(tmp_path, world, clock)
    with pytest.raises(NoOAuthLogin) as caught:
        await login.begin(REDIRECT)
    assert "does not support OAuth login" in str(caught.value)
    assert "[servers.srv.headers]" in str(caught.value)
    assert not login.pending


async def test_an_unreachable_authorization_server_fails_the_start_with_why(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login, http = login_for(tmp_path, world, clock)
    http.down = True
    with pytest.raises(LoginError, match=r"cannot start the login: .*connection refused"):
        await login.begin(REDIRECT)
    assert not login.pending


async def test_a_server_whose_name_leaves_this_machine_mid_login_cannot_point_mcpd_back(
    tmp_path: Path, clock: Clock
) -> None:
    """The server's name resolves to 127.0.0.1 alone when the login starts, so it may
    name an authorization server here; when its metadata is fetched, the name resolves
    to a public address: that answer is not what the grant was for."""
    world = FakeWorld(
        server_url="https://mcp.test:8080/mcp",
        prm_url="https://mcp.test:8080/.well-known/oauth-protected-resource/mcp",
        issuer="http://127.0.0.1:24190",
    )
    answers = [["127.0.0.1"]]

    async def rebinding(host: str, port: int) -> list[str]:
        if host != "mcp.test":
            return await public(host, port)
        return answers.pop() if answers else ["93.184.216.34"]

    auth, _ = server_auth(tmp_path, world, clock, resolver=rebinding)
    with pytest.raises(LoginError) as caught:
        await Login(auth).begin(REDIRECT)
    assert "mcp.test" in str(caught.value) and "93.184.216.34" in str(caught.value)
    assert [url for url in world.urls() if "127.0.0.1" in url] == []


async def test_client_credentials_log_in_without_a_browser(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    world.metadata["token_endpoint_auth_methods_supported"] = ["client_secret_basic"]
    auth, _ = server_auth(
        tmp_path,
        world,
        clock,
        auth={"type": "client_credentials", "client_id": "machine", "client_secret": "s3cret"},
    )
    login = Login(auth)
    assert await login.begin(None) is None
    assert auth.creds.header == "Bearer at-1"
    world.token_status, world.token = 401, {"error": "invalid_client"}
    auth.creds.drop_tokens()
    with pytest.raises(LoginError) as caught:
        await login.begin(None)
    assert "s3cret" not in str(caught.value)


async def test_a_client_credentials_login_ends_the_wait_of_a_server_that_failed(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    """A server whose token endpoint failed waits out its backoff; a person who runs
    `mcpd auth login` after fixing it wants it tried now."""
    world.metadata["token_endpoint_auth_methods_supported"] = ["client_secret_basic"]
    auth, _ = server_auth(
        tmp_path,
        world,
        clock,
        auth={"type": "client_credentials", "client_id": "machine", "client_secret": "s3cret"},
    )
    login = Login(auth)
    woken = trio.Event()

    async def waiter() -> None:
        await auth.wait_changed()
        woken.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert await login.begin(None) is None
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()  # a waiter still waiting is the failure, not a hang
    assert woken.is_set() and auth.creds.header == "Bearer at-1"


# -- logging out --


async def test_logging_out_revokes_both_tokens_forgets_them_and_holds_the_server(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login, _ = login_for(tmp_path, world, clock)
    await log_in(login, world)
    said = await login.logout()
    assert msgspec.to_builtins(said) == {
        "server": "srv",
        "had_tokens": True,
        "revoked": ["refresh_token", "access_token"],
        "not_revocable": [],
        "problem": None,
        "unrevoked": [],
        "forgot_client": False,
    }
    revoked = [world.form(r) for r in world.sent_to(world.metadata["revocation_endpoint"])]
    assert [r["token"] for r in revoked] == ["rt-1", "at-1"]
    assert login.auth.creds.tokens is None
    assert login.auth.needs_login == "logged out; run `mcpd auth login srv`"
    fresh, _ = server_auth(tmp_path, world, clock)
    await fresh.load()
    assert fresh.creds.tokens is None


async def test_logging_out_with_the_revocation_endpoint_down_still_forgets(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login, http = login_for(tmp_path, world, clock)
    await log_in(login, world)
    http.down = True
    said = await login.logout()
    assert said.had_tokens is True and said.revoked == []
    assert said.problem is not None and "connection refused" in said.problem
    assert login.auth.creds.tokens is None


async def test_logging_out_without_revocation_offered_only_forgets(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    del world.metadata["revocation_endpoint"]
    login, _ = login_for(tmp_path, world, clock)
    await log_in(login, world)
    said = await login.logout()
    assert msgspec.to_builtins(said) == {
        "server": "srv",
        "had_tokens": True,
        "revoked": [],
        "not_revocable": [],
        "problem": None,
        "unrevoked": [],
        "forgot_client": False,
    }
    assert login.auth.creds.tokens is None


async def test_logging_out_of_a_server_never_logged_in_to_leaves_it_serving(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login, _ = login_for(tmp_path, world, clock)
    await begun(login)
    said = await login.logout()
    assert msgspec.to_builtins(said) == {
        "server": "srv",
        "had_tokens": False,
        "revoked": [],
        "not_revocable": [],
        "problem": None,
        "unrevoked": [],
        "forgot_client": False,
    }
    assert login.auth.needs_login is None
    assert not login.pending  # a login begun before is abandoned
