from __future__ import annotations

import pytest

from protocol.oauth.urls import (
    canonical_resource,
    check_issuer,
    metadata_urls,
    prm_urls,
    resource_covers,
    server_origin,
)


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
        ("HTTPS://MCP.Example.COM/mcp", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com:8443", "https://mcp.example.com:8443"),
        ("https://mcp.example.com/", "https://mcp.example.com"),
        ("http://localhost:3000/mcp", "http://localhost:3000/mcp"),
        ("http://[::1]:8080/mcp", "http://[::1]:8080/mcp"),
        (
            "https://mcp.example.com/server/mcp?tenant=1",
            "https://mcp.example.com/server/mcp?tenant=1",
        ),
    ],
)
def test_canonical_resource(url: str, canonical: str) -> None:
    assert canonical_resource(url) == canonical


@pytest.mark.parametrize(
    "url", ["mcp.example.com", "https://mcp.example.com#frag", "ftp://x/y", "https://u:p@x/mcp"]
)
def test_canonical_resource_refuses(url: str) -> None:
    with pytest.raises(ValueError):
        canonical_resource(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://user:hunter2/Zq9-SECRET@mcp.example.com/mcp",
        "https://user:hunter2#Zq9-SECRET@mcp.example.com/mcp",
        "https://[user:hunter2@::1]/mcp",
    ],
)
def test_a_server_url_refused_is_not_quoted_with_a_password_in_it(url: str) -> None:
    with pytest.raises(ValueError) as caught:
        canonical_resource(url)
    for part in ("user", "hunter2", "Zq9", "SECRET"):
        assert part not in str(caught.value)


def test_prm_urls_path_first_then_root() -> None:
    assert prm_urls("https://example.com/public/mcp") == [
        "https://example.com/.well-known/oauth-protected-resource/public/mcp",
        "https://example.com/.well-known/oauth-protected-resource",
    ]
    assert prm_urls("http://localhost:3000/mcp?x=1") == [
        "http://localhost:3000/.well-known/oauth-protected-resource/mcp?x=1",
        "http://localhost:3000/.well-known/oauth-protected-resource",
    ]


@pytest.mark.parametrize("url", ["https://example.com", "https://example.com/"])
def test_prm_urls_for_a_server_at_the_root(url: str) -> None:
    assert prm_urls(url) == ["https://example.com/.well-known/oauth-protected-resource"]


def test_metadata_urls_for_an_issuer_with_a_path() -> None:
    assert metadata_urls("https://auth.example.com/tenant1") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]
    # a terminating slash is dropped before the well-known part goes in
    assert metadata_urls("https://auth.example.com/tenant1/")[2] == (
        "https://auth.example.com/tenant1/.well-known/openid-configuration"
    )


@pytest.mark.parametrize("issuer", ["https://auth.example.com", "https://auth.example.com/"])
def test_metadata_urls_for_an_issuer_without_a_path(issuer: str) -> None:
    assert metadata_urls(issuer) == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize("issuer", ["https://a.example/?x=1", "https://a.example/#f", "a.example"])
def test_issuer_shape(issuer: str) -> None:
    with pytest.raises(ValueError):
        check_issuer(issuer)


@pytest.mark.parametrize(
    ("resource", "server", "ok"),
    [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com/", "https://mcp.example.com/mcp", True),
        ("https://MCP.example.com:443/mcp", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com/mcp/", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp/sub", True),
        ("https://evil.example.com/mcp", "http://localhost:3000/mcp", False),
        ("https://mcp.example.com/mc", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com/other", "https://mcp.example.com/mcp", False),
        ("http://mcp.example.com/mcp", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com:8443/mcp", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com/mcp#x", "https://mcp.example.com/mcp", False),
        ("mcp.example.com/mcp", "https://mcp.example.com/mcp", False),
    ],
)
def test_resource_covers(resource: str, server: str, ok: bool) -> None:
    assert resource_covers(resource, server) is ok


def test_server_origin_drops_the_path() -> None:
    assert server_origin("https://api.example.com/v1/mcp") == "https://api.example.com"
    assert server_origin("http://localhost:8080/mcp") == "http://localhost:8080"
