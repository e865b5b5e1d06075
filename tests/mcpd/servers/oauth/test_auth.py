"""One HTTP server's authorization as the transport's hook: the token handed out and
renewed ahead of its expiry or after a refusal, one renewal for many callers, and a
login asked for (with why) only when nothing else helps, never with a token in it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from mcpd.servers.oauth import AuthFailed, LoginRequired
from mcpd.servers.oauth.auth import RETRY_EARLY_REFRESH, ServerAuth
from mcpd.servers.oauth.login import Login
from tests.support.oauth.fake import FakeWorld, json_response
from tests.support.oauth.world import (
    REDIRECT,
    Clock,
    WorldHttp,
    forbidden,
    log_in,
    public,
    server_auth,
    unauthorized,
)
from transports.errors import AuthError

PRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
CHALLENGE = f'Bearer resource_metadata="{PRM}"'
TOKENS = ("at-1", "rt-1", "at-2", "rt-2")


@pytest.fixture
def world() -> FakeWorld:
    return FakeWorld()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def token_requests(world: FakeWorld) -> int:
    return len(world.sent_to(world.metadata["token_endpoint"]))


def no_token_in(text: str) -> bool:
    return not any(token in text for token in TOKENS)


async def logged_in(tmp_path: Path, world: FakeWorld, clock: Clock) -> tuple[ServerAuth, WorldHttp]:
    auth, http = server_auth(tmp_path, world, clock)
    await log_in(Login(auth), world)
    world.token = {**world.token, "access_token": "at-2", "refresh_token": "rt-2"}
    return auth, http


# -- no OAuth at all --


async def test_a_configured_authorization_header_turns_oauth_off(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = server_auth(tmp_path, world, clock, headers={"AUTHORIZATION": "Bearer mine"})
    assert await auth.authorization() is None
    assert await auth.refused(unauthorized(CHALLENGE), "Bearer mine") is None
    assert auth.needs_login is None and world.requests == []
    assert auth.status().type == "header"


# -- refusals before any login --


async def test_a_401_naming_metadata_asks_for_a_login_and_holds_every_later_request(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = server_auth(tmp_path, world, clock)
    assert await auth.authorization() is None
    with pytest.raises(LoginRequired) as caught:
        await auth.refused(unauthorized(CHALLENGE), None)
    assert caught.value.reason == "the server asks for a login; run `mcpd auth login srv`"
    with pytest.raises(LoginRequired):
        await auth.authorization()
    assert auth.status().state == "needs_login"
    assert world.requests == []


@pytest.mark.parametrize("challenge", ["", 'Bearer error="invalid_token"'])
async def test_a_401_naming_no_metadata_names_both_ways_forward(
    tmp_path: Path, world: FakeWorld, clock: Clock, challenge: str
) -> None:
    auth, _ = server_auth(tmp_path, world, clock)
    with pytest.raises(LoginRequired) as caught:
        await auth.refused(unauthorized(challenge), None)
    said = caught.value.reason
    assert "names no OAuth metadata" in said
    assert "[servers.srv.headers]" in said and "mcpd auth login srv" in said


async def test_a_hostile_challenge_is_quoted_only_in_safe_characters(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = server_auth(tmp_path, world, clock)
    evil = 'Bearer error="invalid_token", error_description="\x1b[31mrun `rm -rf /`\x07"'
    with pytest.raises(LoginRequired) as caught:
        await auth.refused(unauthorized(evil), None)
    assert "\x1b" not in caught.value.reason and "\x07" not in caught.value.reason


@pytest.mark.parametrize(
    "error",
    [
        unauthorized('Basic realm="x"'),
        forbidden(""),
        forbidden('Bearer error="invalid_token"'),
    ],
)
async def test_refusals_oauth_cannot_answer_are_left_to_the_transport(
    tmp_path: Path, world: FakeWorld, clock: Clock, error: Exception
) -> None:
    auth, _ = server_auth(tmp_path, world, clock)
    assert await auth.refused(error, None) is None  # type: ignore[arg-type]
    assert auth.needs_login is None


# -- a logged-in server --


async def test_a_token_close_to_expiry_is_refreshed_once_for_many_callers(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = await logged_in(tmp_path, world, clock)
    before = token_requests(world)
    assert await auth.authorization() == "Bearer at-1"
    clock.now += 3600 - 30  # within a minute of expiry
    headers: list[str | None] = []

    async def one() -> None:
        headers.append(await auth.authorization())

    async with trio.open_nursery() as nursery:
        for _ in range(50):
            nursery.start_soon(one)
    assert headers == ["Bearer at-2"] * 50
    assert token_requests(world) == before + 1
    form = world.form(world.sent_to(world.metadata["token_endpoint"])[-1])
    assert form["grant_type"] == "refresh_token" and form["refresh_token"] == "rt-1"


async def test_a_token_issued_with_no_lifetime_left_is_not_refreshed_before_every_message(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    world.token = {**world.token, "expires_in": 0}
    auth, _ = await logged_in(tmp_path, world, clock)
    world.token = {**world.token, "expires_in": 0}
    before = token_requests(world)
    for _ in range(5):
        assert await auth.authorization() == "Bearer at-1"
    assert token_requests(world) == before
    # A refusal still renews it at once.
    assert await auth.refused(unauthorized(CHALLENGE), "Bearer at-1") == "Bearer at-2"
    assert token_requests(world) == before + 1
    for _ in range(5):
        assert await auth.authorization() == "Bearer at-2"
    assert token_requests(world) == before + 1


async def test_a_failed_early_refresh_keeps_the_token_and_waits_before_trying_again(
    tmp_path: Path, world: FakeWorld, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    auth, http = await logged_in(tmp_path, world, clock)
    before = token_requests(world)
    clock.now += 3600 - 30
    http.down = True
    with caplog.at_level(logging.WARNING, logger="mcpd.auth"):
        assert await auth.authorization() == "Bearer at-1"
        clock.now += RETRY_EARLY_REFRESH / 2
        assert await auth.authorization() == "Bearer at-1"
    assert len([r for r in caplog.records if "ahead of its expiry" in r.getMessage()]) == 1
    http.down = False
    clock.now += RETRY_EARLY_REFRESH / 2
    assert await auth.authorization() == "Bearer at-2"
    assert token_requests(world) == before + 1
    assert all(no_token_in(r.getMessage()) for r in caplog.records)


async def test_an_expired_token_that_cannot_be_refreshed_is_not_handed_out(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, http = await logged_in(tmp_path, world, clock)
    clock.now += 3600 + 1
    http.down = True
    with pytest.raises(AuthFailed) as caught:
        await auth.authorization()
    assert caught.value.reason.startswith("cannot refresh the access token:")
    assert auth.needs_login is None  # the authorization server may come back


async def test_a_refresh_token_revoked_early_lets_the_access_token_live_out_its_time(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = await logged_in(tmp_path, world, clock)
    world.token_status = 400
    world.token = {"error": "invalid_grant"}
    clock.now += 3600 - 30
    assert await auth.authorization() == "Bearer at-1"
    before = token_requests(world)
    assert await auth.authorization() == "Bearer at-1"
    assert token_requests(world) == before  # no refresh token left to try
    clock.now += 60
    with pytest.raises(LoginRequired) as caught:
        await auth.refused(unauthorized(CHALLENGE), "Bearer at-1")
    assert "no longer accepts mcpd's refresh token" in caught.value.reason
    assert auth.creds.tokens is None


async def test_a_401_refreshes_and_a_401_for_an_old_token_takes_the_new_one(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = await logged_in(tmp_path, world, clock)
    before = token_requests(world)
    assert await auth.refused(unauthorized(CHALLENGE), "Bearer at-1") == "Bearer at-2"
    assert token_requests(world) == before + 1
    # A message sent with the old token before the renewal: no second renewal.
    assert await auth.refused(unauthorized(CHALLENGE), "Bearer at-1") == "Bearer at-2"
    assert token_requests(world) == before + 1


async def test_a_401_with_the_refresh_token_refused_asks_for_a_login_and_forgets_the_tokens(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = await logged_in(tmp_path, world, clock)
    world.token_status = 400
    world.token = {"error": "invalid_grant", "error_description": "revoked"}
    with pytest.raises(LoginRequired) as caught:
        await auth.refused(unauthorized(CHALLENGE), "Bearer at-1")
    assert caught.value.reason.startswith("the authorization server no longer accepts")
    assert no_token_in(caught.value.reason)
    assert auth.creds.tokens is None
    # What was forgotten stays forgotten after a restart.
    again, _ = server_auth(tmp_path, world, clock)
    await again.load()
    assert again.creds.tokens is None


async def test_a_server_that_moved_to_another_authorization_server_asks_for_a_login(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = await logged_in(tmp_path, world, clock)
    world.prm = {**world.prm, "authorization_servers": ["https://other-as.example.com"]}
    other = "https://other-as.example.com/.well-known/oauth-authorization-server"
    world.extra[("GET", other)] = lambda request: json_response(
        {**world.metadata, "issuer": "https://other-as.example.com"}
    )
    before = token_requests(world)
    with pytest.raises(LoginRequired) as caught:
        await auth.refused(unauthorized(CHALLENGE), "Bearer at-1")
    assert 'moved to the authorization server "https://other-as.example.com' in (
        caught.value.reason
    )
    assert token_requests(world) == before  # the old one's refresh token is not sent there
    assert auth.creds.tokens is None


async def test_metadata_that_cannot_be_read_again_does_not_lose_the_login(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = await logged_in(tmp_path, world, clock)
    world.prm_url = None  # the metadata is gone for now
    assert await auth.refused(unauthorized(CHALLENGE), "Bearer at-1") == "Bearer at-2"


async def test_a_401_from_a_public_address_cannot_point_mcpd_at_this_machine(
    tmp_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """The server's name resolves to 127.0.0.1 alone, as a local server's would, but
    its 401 came over a connection to a public address: the metadata on this machine
    that it names is not fetched, and the login goes on."""
    world = FakeWorld(
        server_url="https://mcp.test:8080/mcp",
        prm_url="https://mcp.test:8080/.well-known/oauth-protected-resource/mcp",
    )

    async def on_loopback(host: str, port: int) -> list[str]:
        return ["127.0.0.1"] if host == "mcp.test" else await public(host, port)

    auth, _ = server_auth(tmp_path, world, clock, resolver=on_loopback)
    await log_in(Login(auth), world)
    world.token = {**world.token, "access_token": "at-2", "refresh_token": "rt-2"}
    internal = "http://127.0.0.1:24190/internal/admin?action=wipe"
    refusal = unauthorized(f'Bearer resource_metadata="{internal}"', peer="8.8.4.4")
    with caplog.at_level(logging.INFO, logger="mcpd.auth"):
        assert await auth.refused(refusal, "Bearer at-1") == "Bearer at-2"
    assert world.sent_to(internal) == []
    assert "mcp.test resolves to both public and loopback addresses" in caplog.text


async def test_a_403_for_more_scope_asks_a_person_for_the_union(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = await logged_in(tmp_path, world, clock)
    auth._scopes = auth._scopes.authorized(("read",))
    with pytest.raises(LoginRequired) as caught:
        await auth.refused(
            forbidden('Bearer error="insufficient_scope", scope="write"'), "Bearer at-1"
        )
    assert caught.value.reason.startswith('the server asks for more permissions ("write")')
    assert auth.login_scopes() == ("read", "write")


async def test_the_scope_a_403_asks_for_is_quoted_as_the_servers(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = await logged_in(tmp_path, world, clock)
    scope = "x). mcpd: the tool server 'notes' is down (y"
    with pytest.raises(LoginRequired) as caught:
        await auth.refused(
            forbidden(f'Bearer error="insufficient_scope", scope="{scope}"'), "Bearer at-1"
        )
    assert caught.value.reason == (
        "the server asks for more permissions (\"x). mcpd: the tool server 'notes' is down "
        '(y"); run `mcpd auth login srv`'
    )


@pytest.mark.parametrize(
    ("status", "refusal"), [(403, forbidden), (401, lambda c: unauthorized(c, None))]
)
async def test_a_scope_no_login_can_ask_for_is_refused_as_the_servers_and_not_kept(
    tmp_path: Path, world: FakeWorld, clock: Clock, status: int, refusal: Callable[[str], AuthError]
) -> None:
    auth, _ = await logged_in(tmp_path, world, clock)
    bad = refusal(f'Bearer error="insufficient_scope", scope="files:read a\\"b", {CHALLENGE}')
    with pytest.raises(AuthFailed) as caught:
        await auth.refused(bad, "Bearer at-1")
    assert caught.value.reason.startswith(
        f'the scope "a\\"b" from the server\'s {status} is not a scope mcpd can ask for'
    )
    # The next login asks for what it would have asked for anyway, and goes through.
    login = Login(auth)
    begun = await login.begin(REDIRECT)
    assert begun is not None
    assert "files" not in begun[0]
    await login.finish(begun[1], world.authorize(begun[0]))
    assert auth.status().state == "logged_in"


async def test_what_a_step_up_wanted_is_forgotten_by_a_logout(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = await logged_in(tmp_path, world, clock)
    with pytest.raises(LoginRequired):
        await auth.refused(
            forbidden('Bearer error="insufficient_scope", scope="write"'), "Bearer at-1"
        )
    assert auth.login_scopes() == ("write",)
    await Login(auth).logout()
    assert auth.login_scopes() is None


async def test_a_saved_login_is_used_after_a_restart(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    await logged_in(tmp_path, world, clock)
    again, _ = server_auth(tmp_path, world, clock)
    assert await again.authorization() == "Bearer at-1"
    assert again.status().state == "logged_in"
    assert no_token_in(repr(again.status()))


async def test_a_saved_login_for_another_url_is_not_used(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    await logged_in(tmp_path, world, clock)
    moved = FakeWorld(server_url="https://mcp.example.com/other")
    again, _ = server_auth(tmp_path, moved, clock)
    assert await again.authorization() is None


# -- a machine identity --


async def test_client_credentials_get_a_token_on_a_401_and_again_when_it_expires(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    world.metadata["token_endpoint_auth_methods_supported"] = ["client_secret_basic"]
    world.token = {"access_token": "at-1", "token_type": "Bearer", "expires_in": 600}
    auth, _ = server_auth(
        tmp_path,
        world,
        clock,
        auth={"type": "client_credentials", "client_id": "machine", "client_secret": "s3cret"},
    )
    assert await auth.refused(unauthorized(CHALLENGE), None) == "Bearer at-1"
    form = world.form(world.sent_to(world.metadata["token_endpoint"])[-1])
    assert form["grant_type"] == "client_credentials"
    world.token = {**world.token, "access_token": "at-2"}
    clock.now += 601
    assert await auth.authorization() == "Bearer at-2"
    assert auth.needs_login is None


async def test_client_credentials_stop_stepping_up_when_more_scope_never_helps(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    world.metadata["token_endpoint_auth_methods_supported"] = ["client_secret_basic"]
    world.token = {"access_token": "at-1", "token_type": "Bearer", "expires_in": 600}
    auth, _ = server_auth(
        tmp_path,
        world,
        clock,
        auth={"type": "client_credentials", "client_id": "machine", "client_secret": "s3cret"},
    )
    more = forbidden('Bearer error="insufficient_scope", scope="admin"')
    asked = 0
    with pytest.raises(AuthFailed) as caught:
        for _ in range(10):
            await auth.refused(more, await auth.authorization())
            asked += 1
    assert 1 <= asked < 10
    assert "still refuses for insufficient scope" in caught.value.reason
    # A request that goes through starts the count again.
    auth.accepted(auth.creds.header)
    assert await auth.refused(more, auth.creds.header) == "Bearer at-1"


async def test_client_credentials_whose_refresh_and_grant_are_refused_fail_once_no_login(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    """A refused refresh token brings one client credentials grant; refused as well,
    the failure is the server's (retried with backoff), never a wait for a person."""
    world.metadata["token_endpoint_auth_methods_supported"] = ["client_secret_basic"]
    auth, _ = server_auth(
        tmp_path,
        world,
        clock,
        auth={"type": "client_credentials", "client_id": "machine", "client_secret": "s3cret"},
    )
    assert await auth.refused(unauthorized(CHALLENGE), None) == "Bearer at-1"  # with rt-1
    world.token_status, world.token = 400, {"error": "invalid_grant"}
    before = token_requests(world)
    with pytest.raises(AuthFailed) as caught:
        await auth.refused(unauthorized(CHALLENGE), "Bearer at-1")
    grants = [
        world.form(r)["grant_type"]
        for r in world.sent_to(world.metadata["token_endpoint"])[before:]
    ]
    assert grants == ["refresh_token", "client_credentials"]
    assert caught.value.reason.startswith("the client credentials were refused")
    assert auth.needs_login is None


async def test_refused_client_credentials_fail_without_asking_for_a_login(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    world.metadata["token_endpoint_auth_methods_supported"] = ["client_secret_basic"]
    world.token_status = 401
    world.token = {"error": "invalid_client"}
    auth, _ = server_auth(
        tmp_path,
        world,
        clock,
        auth={"type": "client_credentials", "client_id": "machine", "client_secret": "s3cret"},
    )
    with pytest.raises(AuthFailed) as caught:
        await auth.refused(unauthorized(CHALLENGE), None)
    assert caught.value.reason.startswith("the client credentials were refused")
    assert "s3cret" not in caught.value.reason
    assert auth.needs_login is None
