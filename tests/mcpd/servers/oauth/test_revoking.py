"""Revoking a login's tokens, and logging out of a server the configuration no longer
names: the refresh token first, then the access token, where the authorization server
offers revocation; why it stopped short, when it did; and the saved login removed
whatever the revocation did, a damaged one included."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest
import trio

from mcpd.local.state.oauth_store import IssuerRecord, OAuthStore, StoredLogin
from mcpd.login_answers import LoggedOut
from mcpd.servers.oauth.revoking import Revocation, forget_unconfigured_in, revoke
from protocol.oauth import (
    AuthorizationServer,
    ClientRegistration,
    HttpRequest,
    HttpResponse,
    Secret,
    ServerMetadata,
    TokenSet,
)
from tests.support.oauth.fake import FakeWorld
from tests.support.oauth.server import OAuthServer, serve_oauth
from tests.support.oauth.world import Clock, WorldHttp

LIMIT = 30


def issuer_of(metadata: dict[str, object]) -> AuthorizationServer:
    issuer = str(metadata["issuer"])
    return AuthorizationServer(issuer, msgspec.convert(metadata, ServerMetadata))


def tokens(issuer: str, refresh: str | None = "rt-1") -> TokenSet:
    return TokenSet(
        access_token=Secret("at-1"),
        refresh_token=None if refresh is None else Secret(refresh),
        issuer=issuer,
    )


def saved(server_url: str, record: IssuerRecord, issuer: str) -> StoredLogin:
    return StoredLogin(server_url=server_url, issuer=issuer, issuers={issuer: record})


# -- revoke --


async def revoked_at(world: FakeWorld, held: TokenSet) -> Revocation:
    http = WorldHttp(world, Clock())
    server = issuer_of(world.metadata)
    reg = ClientRegistration(world.issuer, "dyn-client")
    policy = await http.policy_for(world.server_url)
    return await revoke(http, held, server, reg, policy, None)


def revocations(world: FakeWorld) -> list[dict[str, str]]:
    return [world.form(r) for r in world.sent_to(world.metadata["revocation_endpoint"])]


async def test_the_refresh_token_is_revoked_before_the_access_token() -> None:
    world = FakeWorld()
    assert await revoked_at(world, tokens(world.issuer)) == Revocation(
        ["refresh_token", "access_token"]
    )
    sent = revocations(world)
    assert [(r["token"], r["token_type_hint"]) for r in sent] == [
        ("rt-1", "refresh_token"),
        ("at-1", "access_token"),
    ]


async def test_a_login_without_a_refresh_token_revokes_its_access_token() -> None:
    world = FakeWorld()
    assert await revoked_at(world, tokens(world.issuer, refresh=None)) == Revocation(
        ["access_token"]
    )
    assert [r["token"] for r in revocations(world)] == ["at-1"]


async def test_a_server_that_offers_no_revocation_is_sent_nothing() -> None:
    world = FakeWorld()
    del world.metadata["revocation_endpoint"]
    assert await revoked_at(world, tokens(world.issuer)) == Revocation()
    assert not [r for r in world.requests if r.method == "POST"]


def second_answered(world: FakeWorld, error: bytes) -> list[int]:
    """The revocation endpoint takes the first token and answers the second ``error``."""
    calls = [0]

    def answer(request: HttpRequest) -> HttpResponse:
        calls[0] += 1
        if calls[0] == 1:
            return HttpResponse(200)
        return HttpResponse(400, (("content-type", "application/json"),), error)

    world.extra[("POST", world.metadata["revocation_endpoint"])] = answer
    return calls


async def test_a_revocation_refused_stops_there_and_says_why() -> None:
    world = FakeWorld()
    calls = second_answered(world, b'{"error": "invalid_request"}')
    done = await revoked_at(world, tokens(world.issuer))
    assert done.revoked == ["refresh_token"]
    assert done.problem is not None and "invalid_request" in done.problem
    assert calls == [2]


async def test_a_token_of_a_kind_the_server_does_not_revoke_is_no_failure() -> None:
    # RFC 7009: a server may revoke refresh tokens alone; the access token then ends
    # with its lifetime, and the logout did what it could.
    world = FakeWorld()
    second_answered(world, b'{"error": "unsupported_token_type"}')
    assert await revoked_at(world, tokens(world.issuer)) == Revocation(
        ["refresh_token"], ["access_token"]
    )


# -- forget_unconfigured_in --


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


async def test_nothing_saved_under_the_name_is_none(state: Path) -> None:
    assert await forget_unconfigured_in("gone", str(state)) is None
    await OAuthStore(str(state)).save("kept", StoredLogin(server_url="https://a.example/mcp"))
    assert await forget_unconfigured_in("gone", str(state)) is None
    # A name the folder does not list, though a path it makes leads to a saved login.
    assert await forget_unconfigured_in("../oauth/kept", str(state)) is None
    assert os.listdir(state / "oauth") == ["kept.json"]


async def test_a_damaged_saved_login_is_removed_saying_it_could_not_be_read(state: Path) -> None:
    store = OAuthStore(str(state))
    await store.save("old", StoredLogin(server_url="https://a.example/mcp"))
    Path(store.path("old")).write_text('{"format": 1, "server_url": ')  # cut off
    said = await forget_unconfigured_in("old", str(state))
    assert said is not None
    assert said.problem is not None
    assert said.problem.startswith("the saved login cannot be read (")
    assert said.had_tokens is True and said.revoked == []
    assert said.removed == store.path("old") and not os.path.exists(store.path("old"))


async def test_a_saved_login_without_tokens_is_removed_and_nothing_revoked(state: Path) -> None:
    store = OAuthStore(str(state))
    await store.save("old", StoredLogin(server_url="https://a.example/mcp"))
    said = await forget_unconfigured_in("old", str(state))
    assert said == LoggedOut(
        server="old",
        had_tokens=False,
        revoked=[],
        not_revocable=[],
        problem=None,
        unrevoked=[],
        removed=store.path("old"),
    )
    assert not os.path.exists(store.path("old"))


async def test_tokens_saved_without_where_to_revoke_them_are_removed_saying_so(
    state: Path,
) -> None:
    store = OAuthStore(str(state))
    issuer = "https://auth.example.com"
    await store.save(
        "old", saved("https://a.example/mcp", IssuerRecord(tokens=tokens(issuer)), issuer)
    )
    said = await forget_unconfigured_in("old", str(state))
    assert said is not None
    assert (said.had_tokens, said.revoked) == (True, [])
    assert said.problem == "mcpd does not have their authorization server's metadata to ask it"
    assert said.unrevoked == ["refresh_token", "access_token"]
    assert not os.path.exists(store.path("old"))


@pytest.mark.parametrize("kept_as", ["registration", "tokens_client"])
async def test_a_saved_login_is_revoked_at_its_authorization_server_and_removed(
    state: Path, kept_as: str
) -> None:
    store = OAuthStore(str(state))
    with trio.fail_after(LIMIT):
        async with serve_oauth() as server:
            # The client the tokens were issued to, whether logins still use it or not.
            client = {kept_as: ClientRegistration(server.base, server.client_id)}
            record = IssuerRecord(
                server=issuer_of(server.metadata()), tokens=tokens(server.base), **client
            )
            await store.save("old", saved(server.mcp_url, record, server.base))
            said = await forget_unconfigured_in("old", str(state))
    assert said is not None
    assert said.revoked == ["refresh_token", "access_token"] and said.problem is None
    assert server.revoked == ["rt-1", "at-1"]
    assert not os.path.exists(store.path("old"))


async def test_a_saved_login_whose_server_is_gone_is_removed_saying_why_it_was_not_revoked(
    state: Path,
) -> None:
    store = OAuthStore(str(state))
    with trio.fail_after(LIMIT):
        async with serve_oauth(OAuthServer()) as server:
            record = IssuerRecord(
                server=issuer_of(server.metadata()),
                registration=ClientRegistration(server.base, server.client_id),
                tokens=tokens(server.base),
            )
            login = saved(server.mcp_url, record, server.base)
        # Its port is closed now: nothing answers there.
        await store.save("old", login)
        said = await forget_unconfigured_in("old", str(state))
    assert said is not None
    assert said.revoked == [] and said.had_tokens is True
    assert said.problem is not None
    assert said.problem.startswith("old: authorization: token revocation: cannot connect")
    assert not os.path.exists(store.path("old"))
