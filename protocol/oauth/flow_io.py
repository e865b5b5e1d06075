"""What an authorization flow (``flow``) is given, and the actions it asks its driver
to take: send a request, send the person's browser somewhere, or keep the result."""

from __future__ import annotations

from typing import TypeAlias

import msgspec

from .discovery import DiscoveryResult
from .errors import OAuthConfigError
from .http import HttpRequest
from .registration import ClientConfig, ClientRegistration
from .ssrf import is_loopback_host
from .tokens import TokenSet
from .urls import parse_http_url


class FlowConfig(msgspec.Struct, frozen=True):
    server_url: str
    client: ClientConfig = ClientConfig()
    # Where the authorization server sends the browser back: a loopback http URL
    # (RFC 8252) or https. Required for the authorization code grant.
    redirect_uri: str | None = None
    allow_legacy: bool = True
    protocol_version: str | None = None


class AuthorizationResult(msgspec.Struct, frozen=True):
    tokens: TokenSet
    registration: ClientRegistration
    discovery: DiscoveryResult


class SendRequest(msgspec.Struct, frozen=True):
    request: HttpRequest


class OpenBrowser(msgspec.Struct, frozen=True):
    url: str
    redirect_uri: str


class Authorized(msgspec.Struct, frozen=True):
    result: AuthorizationResult


FlowStep: TypeAlias = SendRequest | OpenBrowser | Authorized


def check_redirect_uri(uri: str) -> str:
    try:
        u = parse_http_url(uri, "redirect URI")
    except ValueError as exc:
        raise OAuthConfigError(str(exc)) from None
    if "#" in uri:
        raise OAuthConfigError(f"redirect URI {uri!r} must not have a fragment")
    if u.scheme != "https" and not is_loopback_host(u.host):
        raise OAuthConfigError(f"redirect URI {uri!r} must be https or on a loopback address")
    return uri
