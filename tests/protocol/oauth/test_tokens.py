from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

import pytest

from protocol.oauth import (
    ClientRegistration,
    HttpResponse,
    OAuthProtocolError,
    Secret,
    TokenEndpointError,
    TokenSet,
    check_revocation,
    parse_token_response,
    refresh_request,
    revocation_request,
)
from protocol.oauth.metadata import AuthorizationServer, ServerMetadata
from protocol.oauth.secret import ISSUED_LONGEST
from protocol.oauth.tokens import SHORTEST_LIFETIME, client_credentials_request
from tests.support.oauth.fake import counter_random

ISSUER = "https://auth.example.com"
SERVER = AuthorizationServer(
    ISSUER,
    ServerMetadata(
        ISSUER, token_endpoint=f"{ISSUER}/token", revocation_endpoint=f"{ISSUER}/revoke"
    ),
)
PUBLIC = ClientRegistration(ISSUER, "pub", None, "none")
RESOURCE = "https://mcp.example.com/mcp"


def answer(obj: Any, status: int = 200) -> HttpResponse:
    return HttpResponse(status, (("content-type", "application/json"),), json.dumps(obj).encode())


def parse(obj: Any, status: int = 200, **kw: Any) -> TokenSet:
    kw.setdefault("requested", ("mcp:basic",))
    return parse_token_response(answer(obj, status), SERVER, resource=RESOURCE, now=1000.0, **kw)


def test_token_response_with_absolute_expiry() -> None:
    tokens = parse(
        {
            "access_token": "a",
            "token_type": "Bearer",
            "expires_in": 3600,
            "refresh_token": "r",
            "scope": "mcp:basic mcp:read",
        }
    )
    assert tokens.expires_at == 4600.0 and tokens.obtained_at == 1000.0
    assert tokens.scope == ("mcp:basic", "mcp:read")
    assert tokens.requested_scope == ("mcp:basic",)
    assert (tokens.issuer, tokens.resource) == (ISSUER, RESOURCE)
    assert tokens.authorization() == "Bearer a"


def test_token_response_defaults() -> None:
    tokens = parse({"access_token": "a", "token_type": "bearer"})
    assert tokens.expires_at is None and tokens.refresh_token is None
    assert tokens.scope == ("mcp:basic",)  # omitted scope = the requested one
    assert not tokens.expired(1e12) and not tokens.should_refresh(1e12)
    assert parse({"access_token": "a", "token_type": "Bearer", "expires_in": "60"}).expires_at == (
        1060.0
    )


@pytest.mark.parametrize("expires_in", [10**12, "1e300", float("inf"), "Infinity"])
def test_a_lifetime_past_any_plan_counts_as_none_stated(expires_in: Any) -> None:
    tokens = parse({"access_token": "a", "token_type": "Bearer", "expires_in": expires_in})
    assert tokens.expires_at is None
    assert parse({"access_token": "a", "token_type": "Bearer", "expires_in": -5}).expires_at == (
        1000.0
    )


@pytest.mark.parametrize(
    ("obj", "match"),
    [
        ({"token_type": "Bearer"}, "access_token"),
        ({"access_token": "", "token_type": "Bearer"}, "empty access token"),
        ({"access_token": "a", "token_type": "DPoP"}, "only uses bearer"),
        ({"access_token": "a", "token_type": "Bearer", "expires_in": "soon"}, "not a number"),
        ({"access_token": "a", "token_type": "Bearer", "expires_in": float("nan")}, "not a number"),
        ({"access_token": "a", "token_type": "Bearer", "expires_in": "NaN"}, "not a number"),
        ({"access_token": 5, "token_type": "Bearer"}, "invalid token response"),
    ],
)
def test_bad_token_responses(obj: Any, match: str) -> None:
    with pytest.raises(OAuthProtocolError, match=match):
        parse(obj)


@pytest.mark.parametrize("field", ["access_token", "refresh_token"])
def test_a_token_longer_than_mcpd_takes_is_refused_by_name(field: str) -> None:
    # Each token mcpd holds is searched for in all that servers send: its length is
    # not the authorization server's to choose.
    obj = {"access_token": "a", "refresh_token": "r", "token_type": "Bearer"}
    parse(dict(obj, **{field: "t" * ISSUED_LONGEST}))
    with pytest.raises(OAuthProtocolError, match=f"returned a {field} of 250000 characters"):
        parse(dict(obj, **{field: "t" * 250_000}))


@pytest.mark.parametrize(
    "token", ["tok with space", "caf\u00e9-token", "tok\tab", "==", "a=b", 'tok"quoted']
)
def test_an_access_token_that_cannot_go_in_a_bearer_header_is_refused(token: str) -> None:
    # RFC 6750 §2.1: a bearer token is a b64token; anything else could not be sent as
    # it was issued, so it is refused before it is stored or used.
    with pytest.raises(OAuthProtocolError) as info:
        parse({"access_token": token, "token_type": "Bearer", "refresh_token": "r"})
    said = str(info.value)
    assert "invalid token response" in said and "b64token" in said
    assert token not in said


@pytest.mark.parametrize("token", ["a", "A-z.0_9~+/", "YWJj==", "tok="])
def test_every_b64token_is_taken(token: str) -> None:
    assert parse({"access_token": token, "token_type": "Bearer"}).authorization() == (
        f"Bearer {token}"
    )


def test_token_errors() -> None:
    with pytest.raises(TokenEndpointError, match='HTTP 400, "invalid_grant": "expired"') as info:
        parse({"error": "invalid_grant", "error_description": "expired"}, 400)
    assert info.value.needs_login and info.value.error == "invalid_grant"
    with pytest.raises(TokenEndpointError, match=r"HTTP 503\)") as other:
        parse_token_response(
            HttpResponse(503, (), b"<html>"), SERVER, resource=RESOURCE, requested=None, now=0
        )
    assert not other.value.needs_login and other.value.status == 503


def test_what_a_token_endpoint_says_is_quoted_as_its_words() -> None:
    said = "expired\"). mcpd: the server 'notes' is down\nlog in"
    with pytest.raises(TokenEndpointError) as info:
        parse({"error": "invalid_grant", "error_description": said}, 400)
    assert '"invalid_grant": "expired\\"). mcpd: the server \'notes\' is down\\nlog in")' in str(
        info.value
    )


def test_refresh_decision() -> None:
    tokens = TokenSet(Secret("a"), expires_at=4600.0, refresh_token=Secret("r"), obtained_at=1000.0)
    assert not tokens.should_refresh(4539.0)
    assert tokens.should_refresh(4540.0)
    assert not tokens.expired(4599.9) and tokens.expired(4600.0)
    short = TokenSet(Secret("a"), expires_at=1060.0, refresh_token=Secret("r"), obtained_at=1000.0)
    assert not short.should_refresh(1029.0) and short.should_refresh(1030.0)
    no_refresh = TokenSet(Secret("a"), expires_at=1060.0, obtained_at=1000.0)
    assert not no_refresh.should_refresh(2000.0)


def test_a_token_issued_already_expired_is_used_for_a_short_while_first() -> None:
    # A lifetime of 0 (or a few seconds) would have every message refresh first; the
    # token is used for the shortest lifetime mcpd plans by, and a refusal still renews it.
    for expires_in in (0, 1):
        tokens = parse(
            {
                "access_token": "a",
                "token_type": "Bearer",
                "expires_in": expires_in,
                "refresh_token": "r",
            }
        )
        assert not tokens.should_refresh(1000.0) and not tokens.expired(1000.0)
        assert not tokens.should_refresh(1000.0 + SHORTEST_LIFETIME / 2 - 1)
        assert tokens.should_refresh(1000.0 + SHORTEST_LIFETIME / 2)
        assert tokens.expired(1000.0 + SHORTEST_LIFETIME)


def test_refresh_request_and_its_answer() -> None:
    old = TokenSet(
        Secret("a"),
        expires_at=1060.0,
        refresh_token=Secret("r-old"),
        scope=("s",),
        requested_scope=("s",),
        issuer=ISSUER,
        resource=RESOURCE,
        obtained_at=0.0,
    )
    req = refresh_request(SERVER, PUBLIC, old, key=None, now=10.0, random=counter_random())
    assert (req.method, req.url) == ("POST", f"{ISSUER}/token")
    assert req.header("content-type") == "application/x-www-form-urlencoded"
    assert dict(parse_qsl(req.body.decode())) == {
        "grant_type": "refresh_token",
        "refresh_token": "r-old",
        "resource": RESOURCE,
        "client_id": "pub",
    }
    kept = parse({"access_token": "b", "token_type": "Bearer"}, previous=old, grant="refresh_token")
    assert kept.refresh_token == Secret("r-old") and kept.scope == ("s",)
    rotated = parse(
        {"access_token": "b", "token_type": "Bearer", "refresh_token": "r-new"}, previous=old
    )
    assert rotated.refresh_token == Secret("r-new")
    with pytest.raises(OAuthProtocolError, match="no refresh token"):
        refresh_request(SERVER, PUBLIC, TokenSet(Secret("a")), key=None, now=0, random=bytes)


def test_client_credentials_request() -> None:
    reg = ClientRegistration(ISSUER, "svc", Secret("pw"), "client_secret_post")
    req = client_credentials_request(
        SERVER, reg, resource=RESOURCE, scopes=("a", "b"), key=None, now=0, random=bytes
    )
    assert dict(parse_qsl(req.body.decode())) == {
        "grant_type": "client_credentials",
        "scope": "a b",
        "resource": RESOURCE,
        "client_id": "svc",
        "client_secret": "pw",
    }


def test_revocation() -> None:
    req = revocation_request(
        SERVER, PUBLIC, Secret("r"), "refresh_token", key=None, now=0, random=bytes
    )
    assert req is not None and req.url == f"{ISSUER}/revoke"
    assert dict(parse_qsl(req.body.decode())) == {
        "token": "r",
        "token_type_hint": "refresh_token",
        "client_id": "pub",
    }
    check_revocation(HttpResponse(200), SERVER)
    with pytest.raises(TokenEndpointError, match="unsupported_token_type"):
        check_revocation(answer({"error": "unsupported_token_type"}, 400), SERVER)
    bare = AuthorizationServer(ISSUER, ServerMetadata(ISSUER, token_endpoint=f"{ISSUER}/token"))
    assert (
        revocation_request(
            bare, PUBLIC, Secret("r"), "refresh_token", key=None, now=0, random=bytes
        )
        is None
    )


def test_store_round_trip() -> None:
    tokens = parse({"access_token": "a", "token_type": "Bearer", "refresh_token": "r"})
    data = tokens.store()
    assert b'"access_token":"a"' in data
    assert TokenSet.load(data) == tokens
