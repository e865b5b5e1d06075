"""A client the authorization server refuses as such (``invalid_client``,
``unauthorized_client``): one mcpd registered is forgotten with its tokens, so that the
next login registers anew; one the configuration names is kept and named as the thing
to check. A login kept when a later login's code exchange is refused keeps the client it
was issued to, for its refresh and its revocation. Logging out keeps the clients mcpd
registered unless asked to forget them."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from mcpd.local.state.oauth_store import OAuthStore
from mcpd.login_answers import LoggedOut
from mcpd.servers.oauth import AuthFailed, LoginError, LoginRequired, RedirectFailed
from mcpd.servers.oauth.auth import ServerAuth
from mcpd.servers.oauth.login import Login
from tests.support.oauth.fake import FakeWorld
from tests.support.oauth.world import REDIRECT, Clock, log_in, server_auth, unauthorized

PRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
CHALLENGE = f'Bearer resource_metadata="{PRM}"'


@pytest.fixture
def world() -> FakeWorld:
    return FakeWorld()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def registrations(world: FakeWorld) -> int:
    return len(world.sent_to(world.metadata["registration_endpoint"]))


def forget_clients(world: FakeWorld, error: str = "invalid_client") -> None:
    world.token_status = 401 if error == "invalid_client" else 400
    world.token = {"error": error, "error_description": "client is invalid"}


async def saved_client(tmp_path: Path, world: FakeWorld, clock: Clock) -> str | None:
    """The client id a restarted daemon would find in the saved login."""
    again, _ = server_auth(tmp_path, world, clock)
    await again.load()
    reg = again.creds.registration()
    return reg.client_id if reg is not None else None


@pytest.mark.parametrize("error", ["invalid_client", "unauthorized_client"])
async def test_a_refused_registered_client_is_forgotten_and_a_login_registers_anew(
    tmp_path: Path, world: FakeWorld, clock: Clock, error: str
) -> None:
    auth, _ = server_auth(tmp_path, world, clock)
    await log_in(Login(auth), world)
    assert registrations(world) == 1
    good = dict(world.token)
    forget_clients(world, error)
    with pytest.raises(LoginRequired) as caught:
        await auth.refused(unauthorized(CHALLENGE), "Bearer at-1")
    assert caught.value.reason.startswith(
        "the authorization server no longer accepts the client mcpd registered with it"
    )
    assert auth.status().state == "needs_login"
    assert auth.creds.tokens is None and auth.creds.registration() is None
    assert await saved_client(tmp_path, world, clock) is None
    world.token_status, world.token = 200, good
    world.registration = {"client_id": "dyn-client-2"}
    await log_in(Login(auth), world)
    assert registrations(world) == 2
    assert world.authorize_queries[-1]["client_id"] == "dyn-client-2"
    assert auth.status().state == "logged_in"


async def test_an_early_refresh_refused_for_the_client_keeps_the_access_token_until_it_expires(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = server_auth(tmp_path, world, clock)
    await log_in(Login(auth), world)
    good = dict(world.token)
    forget_clients(world)
    clock.now += 3600 - 30
    # One refusal while the access token still works costs nothing yet.
    assert await auth.authorization() == "Bearer at-1"
    assert auth.status().state == "logged_in"
    assert auth.creds.registration() is not None
    assert auth.creds.tokens is not None and auth.creds.tokens.refresh_token is not None
    assert await saved_client(tmp_path, world, clock) == "dyn-client"
    # The refusal was passing: the refresh tried again later goes through.
    world.token_status, world.token = 200, {**good, "access_token": "at-2"}
    clock.now += 20
    assert await auth.authorization() == "Bearer at-2"
    assert auth.status().state == "logged_in"


async def test_a_client_still_refused_once_the_access_token_expired_needs_a_login(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = server_auth(tmp_path, world, clock)
    await log_in(Login(auth), world)
    forget_clients(world)
    clock.now += 3600 - 30
    assert await auth.authorization() == "Bearer at-1"
    clock.now += 60
    with pytest.raises(LoginRequired) as caught:
        await auth.authorization()
    assert caught.value.reason.startswith(
        "the authorization server no longer accepts the client mcpd registered with it"
    )
    assert auth.status().state == "needs_login"
    assert await saved_client(tmp_path, world, clock) is None


async def test_a_refused_configured_client_is_kept_and_named_as_the_thing_to_check(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = server_auth(tmp_path, world, clock, auth={"client_id": "by-hand"})
    await log_in(Login(auth), world)
    forget_clients(world)
    with pytest.raises(AuthFailed) as caught:
        await auth.refused(unauthorized(CHALLENGE), "Bearer at-1")
    assert caught.value.reason.endswith(
        'the authorization server refuses the client id "by-hand" that mcpd\'s configuration '
        "names (client_id in [servers.srv.auth]): check that it is still registered there, "
        "with that secret"
    )
    assert auth.needs_login is None
    assert await saved_client(tmp_path, world, clock) == "by-hand"


async def test_a_code_exchange_refused_for_the_client_ends_the_login_and_forgets_it(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth, _ = server_auth(tmp_path, world, clock)
    login = Login(auth)
    await log_in(login, world)
    await login.logout()
    world.registration = {"client_id": "dyn-client"}  # the same id, registered again
    begun = await login.begin(REDIRECT)
    assert begun is not None
    url, login_id = begun
    forget_clients(world)
    with pytest.raises(LoginError) as caught:
        await login.finish(login_id, world.authorize(url))
    assert not isinstance(caught.value, RedirectFailed) and not login.pending
    assert str(caught.value).endswith(
        "the authorization server does not accept the client mcpd registered with it, so mcpd "
        "forgot that client: run `mcpd auth login srv` again to register a new one"
    )
    assert await saved_client(tmp_path, world, clock) is None


async def refused_relogin(tmp_path: Path, world: FakeWorld, clock: Clock) -> Login:
    """Logged in as dyn-client, then a login whose code exchange the token endpoint
    refused for the client; the token endpoint answers as before afterwards."""
    auth, _ = server_auth(tmp_path, world, clock)
    login = Login(auth)
    await log_in(login, world)
    begun = await login.begin(REDIRECT)
    assert begun is not None
    url, login_id = begun
    good = dict(world.token)
    forget_clients(world)
    with pytest.raises(LoginError) as caught:
        await login.finish(login_id, world.authorize(url))
    assert str(caught.value).endswith("run `mcpd auth login srv` again to register a new one")
    world.token_status, world.token = 200, good
    return login


def client_ids(world: FakeWorld, endpoint: str) -> list[str]:
    return [world.form(r)["client_id"] for r in world.sent_to(world.metadata[endpoint])]


async def test_a_relogin_refused_for_the_client_keeps_the_login_there_was(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth = (await refused_relogin(tmp_path, world, clock)).auth
    assert await auth.authorization() == "Bearer at-1"
    assert auth.status().state == "logged_in"
    again, _ = server_auth(tmp_path, world, clock)
    await again.load()
    assert again.creds.tokens is not None and again.creds.registration() is None
    kept = again.creds.tokens_client()
    assert kept is not None and kept.client_id == "dyn-client"
    # The login is renewed as the client its tokens were issued to, until they go.
    assert auth.status().refreshable is True
    world.token = {**world.token, "access_token": "at-2"}
    clock.now += 3600
    assert await auth.authorization() == "Bearer at-2"
    assert client_ids(world, "token_endpoint")[-1] == "dyn-client"
    assert auth.creds.registration() is None
    # The next login registers anew, and its tokens are of that client.
    world.registration = {"client_id": "dyn-client-2"}
    await log_in(Login(auth), world)
    assert registrations(world) == 2
    assert auth.status().client_id == "dyn-client-2"
    current = auth.creds.record.current
    assert current is not None and current.tokens_client is None


async def test_logging_out_of_a_kept_login_revokes_it_as_its_own_client(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login = await refused_relogin(tmp_path, world, clock)
    said = await login.logout()
    assert said == LoggedOut(
        server=login.auth.alias,
        had_tokens=True,
        revoked=["refresh_token", "access_token"],
        not_revocable=[],
        problem=None,
        unrevoked=[],
        forgot_client=False,
    )
    assert client_ids(world, "revocation_endpoint") == ["dyn-client", "dyn-client"]
    again, _ = server_auth(tmp_path, world, clock)
    await again.load()
    current = again.creds.record.current
    assert current is not None and current.tokens is None and current.tokens_client is None


async def test_forgetting_the_client_at_a_logout_revokes_the_kept_login_first(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login = await refused_relogin(tmp_path, world, clock)
    said = await login.logout(forget_client=True)
    assert said.revoked == ["refresh_token", "access_token"] and said.problem is None
    assert client_ids(world, "revocation_endpoint") == ["dyn-client", "dyn-client"]
    again, _ = server_auth(tmp_path, world, clock)
    await again.load()
    assert again.creds.tokens_client() is None and again.creds.registration() is None
    world.registration = {"client_id": "dyn-client-2"}
    await log_in(Login(again), world)
    assert registrations(world) == 2


async def test_a_kept_login_whose_client_is_refused_at_its_expiry_is_forgotten(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth = (await refused_relogin(tmp_path, world, clock)).auth
    forget_clients(world)
    clock.now += 3600
    with pytest.raises(LoginRequired) as caught:
        await auth.authorization()
    assert caught.value.reason.startswith(
        "the authorization server no longer accepts the client mcpd registered with it"
    )
    assert auth.creds.tokens is None and auth.creds.tokens_client() is None
    assert await saved_client(tmp_path, world, clock) is None


async def test_a_login_saved_without_its_client_says_so_and_what_stays_valid(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth = (await refused_relogin(tmp_path, world, clock)).auth
    # As a daemon saved it that forgot the client without keeping it for the tokens.
    path = Path(OAuthStore(str(tmp_path)).path("srv"))
    saved = json.loads(path.read_text())
    assert saved["issuers"][world.issuer].pop("tokens_client")["client_id"] == "dyn-client"
    path.write_text(json.dumps(saved))
    auth, _ = server_auth(tmp_path, world, clock)
    login = Login(auth)
    await auth.load()
    status = auth.status()
    assert (status.refresh_token, status.refreshable) == (True, False)
    said = await login.logout()
    assert said.problem == (
        "mcpd no longer has the client they were issued to, which revoking them needs"
    )
    assert said.unrevoked == ["refresh_token", "access_token"]
    assert world.sent_to(world.metadata["revocation_endpoint"]) == []


async def test_a_login_saved_without_its_client_ends_with_its_access_token(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    auth = (await refused_relogin(tmp_path, world, clock)).auth
    current = auth.creds.record.current
    assert current is not None
    current.tokens_client = None
    clock.now += 3600
    with pytest.raises(LoginRequired) as ended:
        await auth.authorization()
    assert ended.value.reason == (
        "the access token expired, and the client it was issued to was forgotten when the "
        "authorization server refused it; run `mcpd auth login srv`"
    )


@pytest.mark.parametrize("error", ["invalid_client", "unauthorized_client"])
async def test_a_redirect_refusing_the_client_changes_nothing_and_the_login_waits_on(
    tmp_path: Path, world: FakeWorld, clock: Clock, error: str
) -> None:
    auth, _ = server_auth(tmp_path, world, clock)
    login = Login(auth)
    await log_in(login, world)
    begun = await login.begin(REDIRECT)
    assert begun is not None
    url, login_id = begun
    asked = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    refused = f"{asked['redirect_uri']}?" + urlencode(
        {"error": error, "state": asked["state"], "iss": world.issuer}
    )
    with pytest.raises(RedirectFailed) as caught:
        await login.finish(login_id, refused)
    assert "forgot" not in str(caught.value)
    assert login.pending
    assert await auth.authorization() == "Bearer at-1"
    assert auth.status().state == "logged_in"
    assert await saved_client(tmp_path, world, clock) == "dyn-client"
    # The person's own answer still logs in, with the client kept.
    await login.finish(login_id, world.authorize(url))
    assert registrations(world) == 1


async def logged_in(tmp_path: Path, world: FakeWorld, clock: Clock, **server: object) -> Login:
    auth: ServerAuth
    auth, _ = server_auth(tmp_path, world, clock, **server)
    login = Login(auth)
    await log_in(login, world)
    return login


async def test_logging_out_keeps_the_client_mcpd_registered(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login = await logged_in(tmp_path, world, clock)
    said = await login.logout()
    assert said.forgot_client is False
    assert await saved_client(tmp_path, world, clock) == "dyn-client"
    await log_in(login, world)
    assert registrations(world) == 1
    assert world.authorize_queries[-1]["client_id"] == "dyn-client"


async def test_logging_out_forgets_the_client_mcpd_registered_when_asked(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login = await logged_in(tmp_path, world, clock)
    said = await login.logout(forget_client=True)
    assert said.forgot_client is True
    assert await saved_client(tmp_path, world, clock) is None
    await log_in(login, world)
    assert registrations(world) == 2


async def test_logging_out_without_tokens_forgets_the_client_mcpd_registered_when_asked(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login = await logged_in(tmp_path, world, clock)
    login.auth.creds.drop_tokens()
    await login.auth.save()
    assert (await login.logout()).forgot_client is False
    assert await saved_client(tmp_path, world, clock) == "dyn-client"
    said = await login.logout(forget_client=True)
    assert said == LoggedOut(
        server=login.auth.alias,
        had_tokens=False,
        revoked=[],
        not_revocable=[],
        problem=None,
        unrevoked=[],
        forgot_client=True,
    )
    assert await saved_client(tmp_path, world, clock) is None


async def test_logging_out_keeps_a_configured_client(
    tmp_path: Path, world: FakeWorld, clock: Clock
) -> None:
    login = await logged_in(tmp_path, world, clock, auth={"client_id": "by-hand"})
    said = await login.logout(forget_client=True)
    assert said.forgot_client is False
    await log_in(login, world)
    assert registrations(world) == 0
    assert world.authorize_queries[-1]["client_id"] == "by-hand"
