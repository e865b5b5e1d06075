"""Protected-resource metadata (RFC 9728) and authorization-server metadata (RFC 8414).

Both documents are decoded into Structs (unknown members ignored, known members
type-checked) and validated before anything in them is used:

* the resource metadata must speak for the server being accessed (see
  ``urls.resource_covers``) and name at least one authorization server;
* the server metadata's ``issuer`` must be identical, character for character, to
  the issuer the well-known URL was built from (RFC 8414 §3.3); no normalization,
  so ``https://as.example/`` does not match ``https://as.example``;
* its endpoints are http(s) URLs without a fragment, written (but for a host in
  non-ASCII letters) in visible ASCII: one is shown to a person to open.

The authorization code flow additionally needs PKCE with S256 advertised in
``code_challenge_methods_supported`` (MCP: refuse when absent), checked by
``require_pkce`` when a flow actually needs it (client credentials do not).

The 2025-03-26 revision had no resource metadata: the MCP server's origin was the
authorization server, and when it served no metadata either, ``/authorize``,
``/token`` and ``/register`` at that origin were the endpoints. ``default_endpoints``
builds that stand-in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import msgspec

from ..http.parts import sendable_target
from ..shown.server_urls import ascii_url, display_url
from ..shown.visible import quote
from .authorize import shown_list
from .errors import OAuthProtocolError
from .http import HttpResponse, json_object
from .urls import check_issuer, has_fragment, parse_http_url, resource_covers


class ResourceMetadata(msgspec.Struct, frozen=True):
    resource: str
    authorization_servers: tuple[str, ...] = ()
    scopes_supported: tuple[str, ...] | None = None
    bearer_methods_supported: tuple[str, ...] | None = None
    resource_name: str | None = None


class ServerMetadata(msgspec.Struct, frozen=True):
    issuer: str
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    registration_endpoint: str | None = None
    revocation_endpoint: str | None = None
    scopes_supported: tuple[str, ...] | None = None
    response_types_supported: tuple[str, ...] | None = None
    grant_types_supported: tuple[str, ...] | None = None
    code_challenge_methods_supported: tuple[str, ...] | None = None
    token_endpoint_auth_methods_supported: tuple[str, ...] | None = None
    token_endpoint_auth_signing_alg_values_supported: tuple[str, ...] | None = None
    revocation_endpoint_auth_methods_supported: tuple[str, ...] | None = None
    authorization_response_iss_parameter_supported: bool = False
    client_id_metadata_document_supported: bool = False

    def endpoints(self) -> dict[str, str | None]:
        """The endpoints, by their metadata names."""
        return {
            "authorization_endpoint": self.authorization_endpoint,
            "token_endpoint": self.token_endpoint,
            "registration_endpoint": self.registration_endpoint,
            "revocation_endpoint": self.revocation_endpoint,
        }


class AuthorizationServer(msgspec.Struct, frozen=True):
    """An authorization server as discovered: its metadata and where it came from.

    ``source`` is ``"metadata"`` for a fetched document and ``"defaults"`` for the
    2025-03-26 default endpoints of a server that published none.
    """

    issuer: str
    metadata: ServerMetadata
    source: Literal["metadata", "defaults"] = "metadata"
    metadata_url: str | None = None

    @property
    def offers_offline_access(self) -> bool:
        return "offline_access" in (self.metadata.scopes_supported or ())


def _invalid(what: str, url: str, detail: str) -> OAuthProtocolError:
    return OAuthProtocolError(f"{what} at {quote(url)} is invalid: {detail}")


def parse_resource_metadata(response: HttpResponse, url: str, server_url: str) -> ResourceMetadata:
    what = "protected resource metadata"
    obj = json_object(response, f"{what} at {quote(url)}")
    try:
        prm = msgspec.convert(obj, ResourceMetadata)
    except msgspec.ValidationError as exc:
        raise _invalid(what, url, str(exc)) from None
    if not resource_covers(prm.resource, server_url):
        raise OAuthProtocolError(
            f"{what} at {quote(url)} is for the resource {quote(prm.resource)}, not for the "
            f"server {quote(display_url(server_url))}; mcpd will not obtain a token for a "
            "different resource"
        )
    if not prm.authorization_servers:
        raise _invalid(what, url, "it names no authorization server")
    for issuer in prm.authorization_servers:
        try:
            check_issuer(issuer)
        except ValueError as exc:
            raise _invalid(what, url, str(exc)) from None
    return prm


def parse_server_metadata(response: HttpResponse, url: str, issuer: str) -> ServerMetadata:
    what = "authorization server metadata"
    obj = json_object(response, f"{what} at {quote(url)}")
    try:
        meta = msgspec.convert(obj, ServerMetadata)
    except msgspec.ValidationError as exc:
        raise _invalid(what, url, str(exc)) from None
    if meta.issuer != issuer:
        raise OAuthProtocolError(
            f"{what} at {quote(url)} declares the issuer {quote(meta.issuer)}, but it was "
            f"looked up for {quote(issuer)}; the document is not used (RFC 8414 §3.3)"
        )
    for name, endpoint in meta.endpoints().items():
        if endpoint is None:
            continue
        try:
            parse_http_url(endpoint, name)
        except ValueError as exc:
            raise _invalid(what, url, str(exc)) from None
        if has_fragment(endpoint):
            raise _invalid(what, url, f"{name} must not have a fragment")
        # A login shows the authorization endpoint to a person as it is: spaces or
        # letters that draw as them would let the server write a sentence of its own
        # under mcpd's. A host in non-ASCII letters is shown in its ASCII form.
        if not sendable_target(ascii_url(endpoint)):
            raise _invalid(
                what,
                url,
                f"{name} holds a space, a control character or a non-ASCII letter "
                "outside its host (an address must be written in visible ASCII)",
            )
    return meta


def default_endpoints(origin: str) -> AuthorizationServer:
    """The 2025-03-26 stand-in for a server with no metadata at all."""
    meta = ServerMetadata(
        issuer=origin,
        authorization_endpoint=f"{origin}/authorize",
        token_endpoint=f"{origin}/token",
        registration_endpoint=f"{origin}/register",
        code_challenge_methods_supported=("S256",),
    )
    return AuthorizationServer(origin, meta, "defaults")


def require_pkce(server: AuthorizationServer) -> None:
    methods = server.metadata.code_challenge_methods_supported
    if server.source == "defaults":
        return  # 2025-03-26 made PKCE mandatory; there is no document to ask
    if methods is None:
        raise OAuthProtocolError(
            f"the authorization server {quote(server.issuer)} does not advertise PKCE support "
            "(no code_challenge_methods_supported in its metadata); MCP requires PKCE, "
            "so mcpd will not start an authorization with it"
        )
    if "S256" not in methods:
        raise OAuthProtocolError(
            f"the authorization server {quote(server.issuer)} does not offer the S256 PKCE method "
            f"(it offers {shown_list(methods)}); mcpd only uses S256"
        )


def require_endpoint(server: AuthorizationServer, name: str) -> str:
    endpoint = server.metadata.endpoints()[name]
    if not isinstance(endpoint, str) or not endpoint:
        raise OAuthProtocolError(
            f"the authorization server {quote(server.issuer)} publishes no {name} in its metadata"
        )
    return endpoint


def choose_issuer(prm: ResourceMetadata, known: Iterable[str] = ()) -> str:
    """The authorization server to use: the first listed one mcpd already holds
    credentials for, else the first listed (RFC 9728 §7.6 leaves it to the client)."""
    known_set = set(known)
    for issuer in prm.authorization_servers:
        if issuer in known_set:
            return issuer
    return prm.authorization_servers[0]


def issuer_still_listed(issuer: str, prm: ResourceMetadata) -> bool:
    """Whether credentials bound to ``issuer`` still apply to the resource. When the
    metadata no longer lists that issuer the resource moved to another authorization
    server, and everything issued by the old one (client id, tokens) is void there."""
    return issuer in prm.authorization_servers
