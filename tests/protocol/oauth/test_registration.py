from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from msgspec import UNSET, UnsetType

from protocol.oauth import (
    ClientConfig,
    ClientRegistration,
    HttpResponse,
    OAuthConfigError,
    OAuthProtocolError,
    Secret,
)
from protocol.oauth.metadata import AuthorizationServer, ServerMetadata
from protocol.oauth.registration import (
    AuthMethod,
    RegistrationBody,
    basic_credentials,
    choose_auth_method,
    client_auth,
    parse_registration,
    registration_body,
    registration_request,
    select_identity,
)
from tests.support.oauth.fake import counter_random

ISSUER = "https://auth.example.com"


def server(**meta: Any) -> AuthorizationServer:
    meta.setdefault("registration_endpoint", f"{ISSUER}/register")
    return AuthorizationServer(ISSUER, ServerMetadata(ISSUER, **meta))


def test_identity_priority() -> None:
    cimd = ClientConfig(metadata_url="https://mcpd.example/client.json")
    both = server(client_id_metadata_document_supported=True)
    stored = {ISSUER: ClientRegistration(ISSUER, "stored")}
    pre = ClientConfig(client_id="pre", metadata_url="https://mcpd.example/client.json")

    got = select_identity(pre, both, stored, 0)
    assert got is not None and got.client_id == "pre" and got.source == "preregistered"
    got = select_identity(cimd, both, stored, 0)
    assert got is not None and got.client_id == "stored"
    got = select_identity(cimd, both, {}, 0)
    assert got is not None and got.source == "metadata-document" and got.auth_method == "none"
    assert select_identity(cimd, server(), {}, 0) is None  # no CIMD support: register
    assert select_identity(ClientConfig(), both, {}, 0) is None  # no URL configured: register


def test_stored_registration_of_another_issuer_or_expired_is_not_used() -> None:
    other = {ISSUER: ClientRegistration("https://other.example", "x")}
    assert select_identity(ClientConfig(), server(), other, 0) is None
    expired = {ISSUER: ClientRegistration(ISSUER, "x", Secret("s"), secret_expires_at=100.0)}
    assert select_identity(ClientConfig(), server(), expired, 99.0) is not None
    assert select_identity(ClientConfig(), server(), expired, 100.0) is None


def test_metadata_url_must_be_https_with_a_path() -> None:
    both = server(client_id_metadata_document_supported=True)
    for url in ["http://mcpd.example/c.json", "https://mcpd.example", "https://mcpd.example/"]:
        with pytest.raises(OAuthConfigError, match="https URL with a path"):
            select_identity(ClientConfig(metadata_url=url), both, {}, 0)


def test_registration_request() -> None:
    req = registration_request(
        ClientConfig(client_name="mcpd on host"),
        server(token_endpoint_auth_methods_supported=["client_secret_basic", "none"]),
        ["http://127.0.0.1:33418/callback"],
    )
    assert (req.method, req.url) == ("POST", f"{ISSUER}/register")
    assert req.header("content-type") == "application/json"
    assert json.loads(req.body) == {
        "client_name": "mcpd on host",
        "application_type": "native",
        "redirect_uris": ["http://127.0.0.1:33418/callback"],
        "response_types": ["code"],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "none",
    }


@pytest.mark.parametrize(
    ("supported", "method"),
    [
        (None, None),
        (["client_secret_post"], "client_secret_post"),
        (["client_secret_post", "client_secret_basic"], "client_secret_basic"),
        (["private_key_jwt"], None),
    ],
)
def test_registration_asks_for_a_supported_method(
    supported: list[str] | None, method: str | None
) -> None:
    body = registration_body(
        ClientConfig(want_refresh=False),
        server(token_endpoint_auth_methods_supported=supported),
        ["http://127.0.0.1/cb"],
    )
    assert body.token_endpoint_auth_method == (UNSET if method is None else method)
    assert body.grant_types == ["authorization_code"]


def test_registration_for_client_credentials() -> None:
    body = registration_body(ClientConfig(grant="client_credentials"), server(), [])
    assert body.grant_types == ["client_credentials"] and body.redirect_uris is UNSET


def _answer(obj: Any, status: int = 201) -> HttpResponse:
    return HttpResponse(status, (("content-type", "application/json"),), json.dumps(obj).encode())


def _asked(
    redirect_uris: list[str] | UnsetType = UNSET,
    token_endpoint_auth_method: AuthMethod | UnsetType = UNSET,
) -> RegistrationBody:
    return RegistrationBody(
        client_name="mcpd",
        application_type="native",
        redirect_uris=redirect_uris,
        grant_types=["authorization_code"],
        token_endpoint_auth_method=token_endpoint_auth_method,
    )


def test_parse_registration() -> None:
    reg = parse_registration(
        _answer(
            {
                "client_id": "abc",
                "client_secret": "shh",
                "client_secret_expires_at": 0,
                "token_endpoint_auth_method": "client_secret_post",
            }
        ),
        server(),
        _asked(redirect_uris=["http://127.0.0.1/cb"]),
    )
    assert reg.client_id == "abc" and reg.client_secret == Secret("shh")
    assert reg.secret_expires_at is None and reg.auth_method == "client_secret_post"
    assert reg.issuer == ISSUER and reg.redirect_uris == ("http://127.0.0.1/cb",)
    # the method asked for applies when the answer does not name one
    reg = parse_registration(
        _answer({"client_id": "x"}), server(), _asked(token_endpoint_auth_method="none")
    )
    assert reg.auth_method == "none"


@pytest.mark.parametrize(
    ("response", "match"),
    [
        (_answer({"error": "invalid_client_metadata"}, 400), 'HTTP 400: "invalid_client_metadata"'),
        (_answer({"client_secret": "x"}), "missing required field `client_id`"),
        (
            _answer({"client_id": "x", "token_endpoint_auth_method": "tls_client_auth"}),
            "does not speak",
        ),
        (
            _answer({"client_id": "x", "client_secret": "s" * 250_000}),
            "returned a client_secret of 250000 characters",
        ),
        (_answer({"client_id": "x" * 10_000}), "returned a client_id of 10000 characters"),
    ],
)
def test_parse_registration_refusals(response: HttpResponse, match: str) -> None:
    with pytest.raises(OAuthProtocolError, match=match):
        parse_registration(response, server(), _asked())


@pytest.mark.parametrize(
    ("reg_method", "secret", "supported", "key", "expected"),
    [
        ("client_secret_post", True, ["client_secret_basic"], False, "client_secret_post"),
        (None, True, None, False, "client_secret_basic"),  # RFC 8414 default
        (None, True, ["client_secret_post"], False, "client_secret_post"),
        (None, True, ["none"], False, "none"),
        (None, False, ["client_secret_basic"], False, "none"),
        (None, False, ["private_key_jwt", "none"], True, "private_key_jwt"),
    ],
)
def test_choose_auth_method(
    reg_method: Any, secret: bool, supported: list[str] | None, key: bool, expected: str
) -> None:
    from protocol.oauth.keys import EcPrivateKey

    reg = ClientRegistration(ISSUER, "c", Secret("s") if secret else None, reg_method)
    srv = server(token_endpoint_auth_methods_supported=supported)
    assert choose_auth_method(reg, srv, EcPrivateKey(7) if key else None) == expected


def test_client_secret_basic_form_encodes_before_base64() -> None:
    value = basic_credentials("my client", Secret("p@ss:w/rd"))
    assert base64.b64decode(value.removeprefix("Basic ")) == b"my+client:p%40ss%3Aw%2Frd"


def test_client_auth_fields() -> None:
    srv = server()
    fields, headers = client_auth(
        ClientRegistration(ISSUER, "c", Secret("s"), "client_secret_post"),
        srv,
        key=None,
        now=0,
        random=counter_random(),
    )
    assert (fields, headers) == ([("client_id", "c"), ("client_secret", "s")], [])
    fields, headers = client_auth(
        ClientRegistration(ISSUER, "c", Secret("s"), "client_secret_basic"),
        srv,
        key=None,
        now=0,
        random=counter_random(),
    )
    assert (fields, headers) == ([("client_id", "c")], [("Authorization", "Basic Yzpz")])
    with pytest.raises(OAuthConfigError, match="no client secret"):
        client_auth(
            ClientRegistration(ISSUER, "c", None, "client_secret_basic"),
            srv,
            key=None,
            now=0,
            random=counter_random(),
        )
    with pytest.raises(OAuthConfigError, match="no signing key"):
        client_auth(
            ClientRegistration(ISSUER, "c", None, "private_key_jwt"),
            srv,
            key=None,
            now=0,
            random=counter_random(),
        )
