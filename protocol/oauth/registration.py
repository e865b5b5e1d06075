"""Who mcpd is to an authorization server: its client id, and how it authenticates.

Order of choice (MCP "Client Registration"):

1. pre-registered credentials from the configuration. They belong to one issuer;
   when the configuration names it and the server has moved elsewhere, that is an
   error to show, not something to try;
2. a registration mcpd made before with this very issuer (kept by the caller,
   keyed by issuer: credentials never travel between authorization servers);
3. a Client ID Metadata Document: an https URL that is the client id, when the
   server advertises ``client_id_metadata_document_supported`` and one is
   configured;
4. dynamic client registration (RFC 7591, deprecated in MCP) when the server has
   a ``registration_endpoint``; ``application_type`` is always sent.

At the token endpoint the method is the registered one, else the best the server
lists in ``token_endpoint_auth_methods_supported`` for what mcpd holds (a key:
``private_key_jwt``; a secret: ``client_secret_basic``, then ``client_secret_post``;
nothing: ``none``). When the server lists nothing RFC 8414 says it means
``client_secret_basic``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Final, Literal, TypeAlias
from urllib.parse import quote_plus

import msgspec
from msgspec import UNSET, UnsetType

from .authorize import RandomSource, shown, shown_list
from .errors import OAuthConfigError, OAuthProtocolError
from .http import HttpRequest, HttpResponse, json_object, post_json
from .jws import ASSERTION_TYPE, client_assertion
from .keys import SigningKey
from .metadata import AuthorizationServer, require_endpoint
from .secret import Secret, check_issued
from .urls import parse_http_url

AuthMethod: TypeAlias = Literal[
    "none", "client_secret_basic", "client_secret_post", "private_key_jwt"
]
Grant: TypeAlias = Literal["authorization_code", "client_credentials"]
_METHODS: Final[dict[str, AuthMethod]] = {
    "none": "none",
    "client_secret_basic": "client_secret_basic",
    "client_secret_post": "client_secret_post",
    "private_key_jwt": "private_key_jwt",
}


class ClientConfig(msgspec.Struct, frozen=True):
    """The OAuth client settings for one MCP server, from the configuration."""

    client_id: str | None = None
    client_secret: Secret | None = None
    # The authorization server the pre-registered credentials were issued by.
    issuer: str | None = None
    auth_method: AuthMethod | None = None
    signing_key: SigningKey | None = None
    # An https URL serving mcpd's Client ID Metadata Document.
    metadata_url: str | None = None
    client_name: str = "mcpd"
    application_type: Literal["native", "web"] = "native"
    grant: Grant = "authorization_code"
    # Ask for refresh tokens (grant type in the registration, offline_access scope).
    want_refresh: bool = True


class ClientRegistration(msgspec.Struct, frozen=True):
    """A client identity bound to the authorization server ``issuer``."""

    issuer: str
    client_id: str
    client_secret: Secret | None = None
    auth_method: AuthMethod | None = None
    source: Literal["preregistered", "metadata-document", "dynamic"] = "dynamic"
    secret_expires_at: float | None = None
    redirect_uris: tuple[str, ...] = ()

    def expired(self, now: float) -> bool:
        return self.secret_expires_at is not None and now >= self.secret_expires_at


def check_metadata_url(url: str) -> str:
    try:
        u = parse_http_url(url, "client metadata URL")
    except ValueError as exc:
        raise OAuthConfigError(str(exc)) from None
    if u.scheme != "https" or u.path in ("", "/") or "#" in url:
        raise OAuthConfigError(
            f"client metadata URL {url!r} must be an https URL with a path and no fragment"
        )
    return url


def select_identity(
    config: ClientConfig,
    server: AuthorizationServer,
    stored: Mapping[str, ClientRegistration],
    now: float,
) -> ClientRegistration | None:
    """The identity to use with ``server``, or ``None`` when mcpd must register."""
    if config.client_id is not None:
        if config.issuer is not None and config.issuer != server.issuer:
            raise OAuthConfigError(
                f"the configured client_id belongs to the authorization server "
                f"{shown(config.issuer)}, but the server is now protected by "
                f"{shown(server.issuer)}; "
                "update the client credentials for the new authorization server"
            )
        return ClientRegistration(
            server.issuer,
            config.client_id,
            config.client_secret,
            config.auth_method,
            "preregistered",
        )
    known = stored.get(server.issuer)
    if known is not None and known.issuer == server.issuer and not known.expired(now):
        return known
    meta = server.metadata
    if config.metadata_url is not None and meta.client_id_metadata_document_supported:
        method: AuthMethod = "private_key_jwt" if config.signing_key is not None else "none"
        return ClientRegistration(
            server.issuer,
            check_metadata_url(config.metadata_url),
            None,
            method,
            "metadata-document",
        )
    if meta.registration_endpoint:
        return None
    cimd = (
        "no client metadata URL is configured"
        if meta.client_id_metadata_document_supported
        else "it does not accept Client ID Metadata Documents"
    )
    raise OAuthConfigError(
        f"mcpd has no client id for the authorization server {shown(server.issuer)}: {cimd} and it "
        "offers no dynamic client registration; register a client there and configure "
        "its client_id (and secret)"
    )


def _requested_method(server: AuthorizationServer, config: ClientConfig) -> AuthMethod | None:
    supported = server.metadata.token_endpoint_auth_methods_supported
    if config.auth_method is not None:
        return config.auth_method
    if supported is None:
        return None
    if config.signing_key is not None and "private_key_jwt" in supported:
        return "private_key_jwt"
    for method in ("none", "client_secret_basic", "client_secret_post"):
        if method in supported:
            return method
    return None


class RegistrationBody(msgspec.Struct, kw_only=True, frozen=True):
    """The client metadata sent to a registration endpoint (RFC 7591 §2)."""

    client_name: str
    application_type: Literal["native", "web"]
    redirect_uris: list[str] | UnsetType = UNSET
    response_types: list[str] | UnsetType = UNSET
    grant_types: list[str]
    token_endpoint_auth_method: AuthMethod | UnsetType = UNSET


def registration_body(
    config: ClientConfig, server: AuthorizationServer, redirect_uris: Sequence[str]
) -> RegistrationBody:
    method = _requested_method(server, config)
    asked: AuthMethod | UnsetType = UNSET if method is None else method
    if config.grant == "client_credentials":
        return RegistrationBody(
            client_name=config.client_name,
            application_type=config.application_type,
            grant_types=["client_credentials"],
            token_endpoint_auth_method=asked,
        )
    grants = ["authorization_code"]
    if config.want_refresh:
        grants.append("refresh_token")
    return RegistrationBody(
        client_name=config.client_name,
        application_type=config.application_type,
        redirect_uris=list(redirect_uris),
        response_types=["code"],
        grant_types=grants,
        token_endpoint_auth_method=asked,
    )


def registration_request(
    config: ClientConfig, server: AuthorizationServer, redirect_uris: Sequence[str]
) -> HttpRequest:
    endpoint = require_endpoint(server, "registration_endpoint")
    body = registration_body(config, server, redirect_uris)
    return post_json(endpoint, body, "client registration")


class _Registered(msgspec.Struct):
    client_id: str
    client_secret: str | None = None
    client_secret_expires_at: float | None = None
    token_endpoint_auth_method: str | None = None
    redirect_uris: list[str] | None = None


def parse_registration(
    response: HttpResponse, server: AuthorizationServer, requested: RegistrationBody
) -> ClientRegistration:
    where = f"client registration at {shown(server.metadata.registration_endpoint or '')}"
    if response.status not in (200, 201):
        detail = _error_detail(response)
        raise OAuthProtocolError(
            f"{where} was refused (HTTP {response.status}{detail}); register a client "
            "by hand and configure its client_id"
        )
    obj = json_object(response, where)
    try:
        reg = msgspec.convert(obj, _Registered)
    except msgspec.ValidationError as exc:
        raise OAuthProtocolError(f"{where} answered an invalid registration: {exc}") from None
    check_issued(where, "client_id", reg.client_id)
    if reg.client_secret is not None:
        check_issued(where, "client_secret", reg.client_secret)
    named = reg.token_endpoint_auth_method
    method: AuthMethod | None = None
    if named:
        method = _METHODS.get(named)
        if method is None:
            raise OAuthProtocolError(
                f"{where} registered the client for {shown(named)}, which mcpd does not speak"
            )
    elif requested.token_endpoint_auth_method is not UNSET:
        method = requested.token_endpoint_auth_method
    expires = reg.client_secret_expires_at or None  # 0 means "never"
    asked_uris = () if requested.redirect_uris is UNSET else requested.redirect_uris
    return ClientRegistration(
        issuer=server.issuer,
        client_id=reg.client_id,
        client_secret=None if reg.client_secret is None else Secret(reg.client_secret),
        auth_method=method,
        source="dynamic",
        secret_expires_at=expires,
        redirect_uris=tuple(reg.redirect_uris or asked_uris),
    )


def is_registration_error(response: HttpResponse) -> bool:
    """Whether a refused registration is an authorization server's answer (RFC 7591
    §3.2.2: HTTP 400 with an ``error`` in a JSON object), not just any reply."""
    if response.status != 400:
        return False
    try:
        return isinstance(json_object(response, "error").get("error"), str)
    except OAuthProtocolError:
        return False


def _error_detail(response: HttpResponse) -> str:
    try:
        obj = json_object(response, "error")
    except OAuthProtocolError:
        return ""
    error = obj.get("error")
    text = obj.get("error_description")
    parts = [shown(v) for v in (error, text) if isinstance(v, str) and v]
    return ": " + " - ".join(parts) if parts else ""


def choose_auth_method(
    reg: ClientRegistration, server: AuthorizationServer, key: SigningKey | None
) -> AuthMethod:
    if reg.auth_method is not None:
        return reg.auth_method
    supported = server.metadata.token_endpoint_auth_methods_supported or ("client_secret_basic",)
    if key is not None and "private_key_jwt" in supported:
        return "private_key_jwt"
    if reg.client_secret is not None:
        if "client_secret_basic" in supported:
            return "client_secret_basic"
        if "client_secret_post" in supported:
            return "client_secret_post"
    return "none"


def basic_credentials(client_id: str, secret: Secret) -> str:
    """The ``Authorization`` value of client_secret_basic: both parts form-encoded
    before base64, as RFC 6749 §2.3.1 says."""
    raw = f"{quote_plus(client_id)}:{quote_plus(secret.reveal())}".encode()
    return "Basic " + base64.b64encode(raw).decode("ascii")


def client_auth(
    reg: ClientRegistration,
    server: AuthorizationServer,
    *,
    key: SigningKey | None,
    now: float,
    random: RandomSource,
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The form fields and headers that authenticate the client at the token
    (or revocation) endpoint."""
    method = choose_auth_method(reg, server, key)
    if method == "none":
        return [("client_id", reg.client_id)], []
    if method == "private_key_jwt":
        if key is None:
            raise OAuthConfigError(
                f"the client is registered for private_key_jwt with {shown(server.issuer)}, "
                "but no signing key is configured"
            )
        algs = server.metadata.token_endpoint_auth_signing_alg_values_supported
        if algs is not None and key.alg not in algs:
            raise OAuthConfigError(
                f"the authorization server {shown(server.issuer)} accepts client assertions signed "
                f"with {shown_list(algs)}, not {key.alg}; configure a matching key"
            )
        assertion = client_assertion(
            client_id=reg.client_id, audience=server.issuer, key=key, now=now, random=random
        )
        fields = [
            ("client_id", reg.client_id),
            ("client_assertion_type", ASSERTION_TYPE),
            ("client_assertion", assertion),
        ]
        return fields, []
    if reg.client_secret is None:
        raise OAuthConfigError(
            f"the client is registered for {method} with {shown(server.issuer)}, "
            "but no client secret is known"
        )
    if method == "client_secret_basic":
        # client_id in the body as well: RFC 6749 allows it, and authorization servers
        # that look the client up before reading the header (the MCP Python SDK's) need it.
        basic = basic_credentials(reg.client_id, reg.client_secret)
        return [("client_id", reg.client_id)], [("Authorization", basic)]
    return [("client_id", reg.client_id), ("client_secret", reg.client_secret.reveal())], []
