"""Discovery driven one request at a time, with the answers a hostile or broken
resource server or authorization server can give: where it looks, what it refuses,
and that a failure stops it for good."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.oauth import (
    BearerChallenge,
    BlockedUrl,
    FetchPolicy,
    HttpResponse,
    NoAuthorizationMetadata,
    OAuthProtocolError,
    OAuthUsageError,
)
from protocol.oauth.discovery import Discovery, DiscoveryState
from protocol.oauth.http import MAX_BODY
from tests.support.oauth.fake import NOT_FOUND, json_response

SERVER = "https://mcp.example.com/mcp"
PRM_URL = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
ROOT_PRM_URL = "https://mcp.example.com/.well-known/oauth-protected-resource"
ISSUER = "https://auth.example.com"
AS_URL = "https://auth.example.com/.well-known/oauth-authorization-server"
OIDC_URL = "https://auth.example.com/.well-known/openid-configuration"
NAMED = BearerChallenge(resource_metadata=PRM_URL)


def prm(**changes: Any) -> dict[str, Any]:
    return {"resource": SERVER, "authorization_servers": [ISSUER], **changes}


def as_meta(**changes: Any) -> dict[str, Any]:
    return {
        "issuer": ISSUER,
        "authorization_endpoint": f"{ISSUER}/authorize",
        "token_endpoint": f"{ISSUER}/token",
        "code_challenge_methods_supported": ["S256"],
        **changes,
    }


def step(discovery: Discovery, response: HttpResponse) -> str:
    """Answer the outstanding request; return its URL."""
    request = discovery.next_request()
    assert request is not None
    discovery.receive(response)
    return request.url


def test_named_metadata_then_the_issuer_metadata() -> None:
    d = Discovery(SERVER, NAMED, policy=FetchPolicy())
    assert d.state is DiscoveryState.RESOURCE_METADATA
    assert step(d, json_response(prm())) == PRM_URL
    assert d.state is DiscoveryState.SERVER_METADATA
    assert step(d, json_response(as_meta())) == AS_URL
    assert d.state is DiscoveryState.DONE
    assert d.next_request() is None
    result = d.result
    assert (result.issuer, result.resource) == (ISSUER, SERVER)
    assert not result.legacy and result.server.metadata_url == AS_URL
    assert result.challenge is NAMED


def test_requests_are_plain_gets_for_json() -> None:
    d = Discovery(SERVER, NAMED, policy=FetchPolicy())
    request = d.next_request()
    assert request is not None
    assert (request.method, request.body, request.header("accept")) == (
        "GET",
        b"",
        "application/json",
    )


@pytest.mark.parametrize("status", [404, 500, 301, 302, 401])
def test_named_metadata_that_is_not_served_is_not_guessed(status: int) -> None:
    d = Discovery(SERVER, NAMED, policy=FetchPolicy())
    with pytest.raises(OAuthProtocolError, match="publishes no protected resource metadata") as e:
        step(d, HttpResponse(status, (("location", ROOT_PRM_URL),)))
    assert f'"{PRM_URL}": HTTP {status}' in str(e.value)
    assert ("redirect, not followed" in str(e.value)) == (300 <= status < 400)
    assert d.state is DiscoveryState.FAILED
    with pytest.raises(OAuthUsageError, match="failed"):
        d.next_request()


def test_unnamed_metadata_is_looked_for_at_the_path_then_the_root() -> None:
    d = Discovery(SERVER, None, policy=FetchPolicy())
    assert step(d, NOT_FOUND) == PRM_URL
    assert step(d, json_response(prm())) == ROOT_PRM_URL
    assert step(d, NOT_FOUND) == AS_URL
    assert step(d, json_response(as_meta())) == OIDC_URL
    assert d.result.resource_metadata is not None


def test_metadata_for_another_resource_is_refused_not_skipped() -> None:
    d = Discovery(SERVER, None, policy=FetchPolicy())
    with pytest.raises(OAuthProtocolError, match="not for the server"):
        step(d, json_response(prm(resource="https://other.example.com/mcp")))
    assert d.state is DiscoveryState.FAILED


@pytest.mark.parametrize(
    "declared",
    [
        "https://evil.example.com",  # mix-up: another server's document
        "https://auth.example.com/",
        "http://auth.example.com",
        "https://AUTH.example.com",
    ],
)
def test_server_metadata_for_another_issuer_ends_discovery(declared: str) -> None:
    d = Discovery(SERVER, NAMED, policy=FetchPolicy())
    step(d, json_response(prm()))
    with pytest.raises(OAuthProtocolError, match="declares the issuer"):
        step(d, json_response(as_meta(issuer=declared)))
    # The next well-known URL is never asked: a wrong document is not skipped.
    assert d.state is DiscoveryState.FAILED
    with pytest.raises(OAuthUsageError):
        d.next_request()


@pytest.mark.parametrize(
    ("issuer", "error", "match"),
    [
        ("http://auth.example.com", BlockedUrl, "must use https"),
        ("https://127.0.0.1", BlockedUrl, "loopback"),
        ("https://localhost:9000", BlockedUrl, "loopback"),
        ("https://169.254.169.254", BlockedUrl, "link-local"),
        ("https://10.0.0.1", BlockedUrl, "private"),
        ("https://user:pw@auth.example.com", OAuthProtocolError, "credentials"),
        ("https://auth.example.com?tenant=1", OAuthProtocolError, "query"),
        ("https://auth.example.com#x", OAuthProtocolError, "fragment"),
        ("file:///etc/passwd", OAuthProtocolError, "http"),
    ],
)
def test_an_issuer_a_remote_server_may_not_send_us_to(
    issuer: str, error: type[Exception], match: str
) -> None:
    d = Discovery(SERVER, NAMED, policy=FetchPolicy())
    with pytest.raises(error, match=match):
        step(d, json_response(prm(authorization_servers=[issuer])))
    assert d.state is DiscoveryState.FAILED


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("http://mcp.example.com/.well-known/oauth-protected-resource", "must use https"),
        ("https://127.0.0.1/.well-known/oauth-protected-resource", "loopback"),
        ("https://[::ffff:169.254.169.254]/x", "link-local"),
        ("https://user:pw@mcp.example.com/x", "credentials"),
        ("gopher://mcp.example.com/x", "http"),
    ],
)
def test_a_challenge_cannot_name_metadata_we_may_not_fetch(url: str, match: str) -> None:
    with pytest.raises(BlockedUrl, match=match):
        Discovery(SERVER, BearerChallenge(resource_metadata=url), policy=FetchPolicy())


def test_a_plain_http_server_off_loopback_gets_no_oauth_over_http() -> None:
    server = "http://mcp.example.com/mcp"
    policy = FetchPolicy.for_server(server, ["93.184.216.34"])
    with pytest.raises(BlockedUrl, match="must use https"):
        Discovery(server, None, policy=policy)


@pytest.mark.parametrize(
    "body",
    [
        b"<html>login</html>",
        b"[]",
        b'"text"',
        b"\xff\xfe",
        b'{"resource": 7, "authorization_servers": []}',
        b'{"resource": "https://mcp.example.com/mcp", "authorization_servers": "x"}',
        b'{"resource": "https://mcp.example.com/mcp", "authorization_servers": []}',
        b'{"resource": "https://mcp.example.com/mcp"}',
    ],
)
def test_resource_metadata_of_the_wrong_shape(body: bytes) -> None:
    d = Discovery(SERVER, NAMED, policy=FetchPolicy())
    with pytest.raises(OAuthProtocolError, match=PRM_URL):
        step(d, HttpResponse(200, (("content-type", "application/json"),), body))


def test_a_huge_document_is_refused_without_being_parsed() -> None:
    d = Discovery(SERVER, NAMED, policy=FetchPolicy())
    step(d, json_response(prm()))
    padding = "x" * MAX_BODY
    with pytest.raises(OAuthProtocolError, match="larger than"):
        step(d, json_response(as_meta(padding=padding)))


@pytest.mark.parametrize(
    "endpoint",
    ["javascript:alert(1)", "https://user:pw@auth.example.com/token", "https:///token", 5],
)
def test_server_metadata_with_an_endpoint_that_is_no_http_url(endpoint: object) -> None:
    d = Discovery(SERVER, NAMED, policy=FetchPolicy())
    step(d, json_response(prm()))
    with pytest.raises(OAuthProtocolError, match="is invalid"):
        step(d, json_response(as_meta(token_endpoint=endpoint)))


def test_an_issuer_with_credentials_here_is_preferred() -> None:
    second = "https://second.example.com"
    d = Discovery(SERVER, NAMED, policy=FetchPolicy(), known_issuers=[second])
    step(d, json_response(prm(authorization_servers=[ISSUER, second])))
    request = d.next_request()
    assert request is not None
    assert request.url == f"{second}/.well-known/oauth-authorization-server"


def test_an_issuer_with_a_path_is_looked_up_three_ways() -> None:
    issuer = "https://auth.example.com/tenant"
    d = Discovery(SERVER, NAMED, policy=FetchPolicy())
    step(d, json_response(prm(authorization_servers=[issuer])))
    urls = [step(d, NOT_FOUND) for _ in range(2)]
    urls.append(step(d, json_response(as_meta(issuer=issuer))))
    assert urls == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant",
        "https://auth.example.com/.well-known/openid-configuration/tenant",
        "https://auth.example.com/tenant/.well-known/openid-configuration",
    ]
    assert d.result.issuer == issuer


def test_an_issuer_with_no_metadata_anywhere_is_an_error_that_lists_each_url() -> None:
    d = Discovery(SERVER, NAMED, policy=FetchPolicy())
    step(d, json_response(prm()))
    step(d, NOT_FOUND)
    with pytest.raises(OAuthProtocolError, match="publishes no metadata") as e:
        step(d, HttpResponse(503))
    assert f'"{AS_URL}": HTTP 404' in str(e.value) and f'"{OIDC_URL}": HTTP 503' in str(e.value)


def test_a_server_without_resource_metadata_is_its_own_issuer() -> None:
    d = Discovery(SERVER, None, policy=FetchPolicy())
    step(d, NOT_FOUND)
    step(d, NOT_FOUND)
    assert (
        step(d, json_response(as_meta(issuer="https://mcp.example.com")))
        == "https://mcp.example.com/.well-known/oauth-authorization-server"
    )
    assert d.result.legacy and d.result.issuer == "https://mcp.example.com"
    assert d.result.resource == SERVER
    assert d.result.looked_at == ()


def test_no_metadata_at_all_falls_back_to_default_endpoints_and_says_where_it_looked() -> None:
    d = Discovery(SERVER, None, policy=FetchPolicy())
    for _ in range(4):
        step(d, HttpResponse(404))
    result = d.result
    assert result.server.source == "defaults"
    assert result.server.metadata.token_endpoint == "https://mcp.example.com/token"
    assert [url for url, _ in result.looked_at] == [
        PRM_URL,
        ROOT_PRM_URL,
        "https://mcp.example.com/.well-known/oauth-authorization-server",
        "https://mcp.example.com/.well-known/openid-configuration",
    ]


def test_without_the_fallback_no_resource_metadata_is_no_oauth() -> None:
    d = Discovery(SERVER, None, policy=FetchPolicy(), allow_legacy=False)
    step(d, HttpResponse(404))
    with pytest.raises(NoAuthorizationMetadata) as e:
        step(d, HttpResponse(302))
    assert e.value.looked_at == ((PRM_URL, 404), (ROOT_PRM_URL, 302))
    assert "a redirect, not followed" in str(e.value)
    assert d.state is DiscoveryState.FAILED


def test_the_protocol_version_goes_only_to_the_server_own_origin() -> None:
    elsewhere = "https://mcp.example.com.evil.example/.well-known/oauth-protected-resource"
    for challenge, expected in [(None, "2026-07-28"), (BearerChallenge(elsewhere), None)]:
        d = Discovery(SERVER, challenge, policy=FetchPolicy(), protocol_version="2026-07-28")
        request = d.next_request()
        assert request is not None
        assert request.header("mcp-protocol-version") == expected
    d = Discovery(SERVER, NAMED, policy=FetchPolicy(), protocol_version="2026-07-28")
    step(d, json_response(prm()))
    request = d.next_request()
    assert request is not None and request.header("mcp-protocol-version") is None


def test_calls_out_of_order_are_usage_errors() -> None:
    d = Discovery(SERVER, NAMED, policy=FetchPolicy())
    with pytest.raises(OAuthUsageError, match="not finished"):
        d.result  # noqa: B018
    d.receive(json_response(prm()))
    d.receive(json_response(as_meta()))
    with pytest.raises(OAuthUsageError, match="no discovery request is outstanding"):
        d.receive(json_response(as_meta()))
    assert d.state is DiscoveryState.DONE
