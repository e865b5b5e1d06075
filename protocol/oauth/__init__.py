"""The MCP authorization client (OAuth 2.1), sans-IO.

Nothing here sends a byte, reads a clock or draws randomness unasked: requests
come out as ``HttpRequest`` values for the I/O layer (``transports.oauth_http``),
responses go back in as ``HttpResponse``; ``now`` is an argument; PKCE and state
use an injectable random source.

The pieces, bottom up: ``challenge`` (WWW-Authenticate), ``urls`` (canonical
resource, well-known URLs), ``ssrf`` (which URLs may be fetched), ``metadata``
(RFC 9728 and RFC 8414 documents), ``scopes`` (selection, step-up),
``authorize`` (PKCE, state, the authorization URL, the redirect and ``iss``),
``registration`` (client identity, DCR, token endpoint authentication), ``keys``
and ``jws`` (private_key_jwt), ``tokens`` (grants, refresh, revocation),
``discovery`` and ``flow`` (the state machines).
"""

from .authorize import AuthorizationCode, PendingAuthorization, Pkce, parse_redirect
from .challenge import BearerChallenge, Challenge, bearer_challenge, parse_www_authenticate
from .discovery import Discovery, DiscoveryResult, DiscoveryState
from .errors import (
    AuthorizationDenied,
    BlockedUrl,
    OAuthConfigError,
    OAuthError,
    OAuthProtocolError,
    OAuthUsageError,
    StepUpLimit,
    TokenEndpointError,
)
from .flow import (
    Action,
    AuthorizationFlow,
    AuthorizationResult,
    Authorized,
    FlowConfig,
    FlowState,
    OpenBrowser,
    SendRequest,
)
from .http import HttpRequest, HttpResponse
from .keys import EcPrivateKey, RsaPrivateKey, SigningKey, load_signing_key
from .metadata import (
    AuthorizationServer,
    ResourceMetadata,
    ServerMetadata,
    issuer_still_listed,
)
from .registration import ClientConfig, ClientRegistration, client_metadata_document
from .scopes import ScopeState
from .secret import Secret
from .ssrf import FetchPolicy
from .tokens import (
    TokenSet,
    check_revocation,
    parse_token_response,
    refresh_request,
    revocation_request,
)
from .urls import canonical_resource

__all__ = [
    "Action",
    "AuthorizationCode",
    "AuthorizationDenied",
    "AuthorizationFlow",
    "AuthorizationResult",
    "AuthorizationServer",
    "Authorized",
    "BearerChallenge",
    "BlockedUrl",
    "Challenge",
    "ClientConfig",
    "ClientRegistration",
    "Discovery",
    "DiscoveryResult",
    "DiscoveryState",
    "EcPrivateKey",
    "FetchPolicy",
    "FlowConfig",
    "FlowState",
    "HttpRequest",
    "HttpResponse",
    "OAuthConfigError",
    "OAuthError",
    "OAuthProtocolError",
    "OAuthUsageError",
    "OpenBrowser",
    "PendingAuthorization",
    "Pkce",
    "ResourceMetadata",
    "RsaPrivateKey",
    "ScopeState",
    "Secret",
    "SendRequest",
    "ServerMetadata",
    "SigningKey",
    "StepUpLimit",
    "TokenEndpointError",
    "TokenSet",
    "bearer_challenge",
    "canonical_resource",
    "check_revocation",
    "client_metadata_document",
    "issuer_still_listed",
    "load_signing_key",
    "parse_redirect",
    "parse_token_response",
    "parse_www_authenticate",
    "refresh_request",
    "revocation_request",
]
