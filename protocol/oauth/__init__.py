"""The MCP authorization client (OAuth 2.1), sans-IO.

Nothing here sends a byte, reads a clock or draws randomness unasked: requests
come out as ``HttpRequest`` values for the I/O layer (``transports.http.oauth_client``),
responses go back in as ``HttpResponse``; ``now`` is an argument; PKCE and state
use an injectable random source.

The pieces, bottom up: ``challenge`` (WWW-Authenticate), ``urls`` (canonical
resource, well-known URLs), ``ssrf`` (which URLs may be fetched), ``metadata``
(RFC 9728 and RFC 8414 documents), ``scopes`` (selection, step-up),
``authorize`` (PKCE, state, the authorization URL, the redirect and ``iss``),
``registration`` (client identity, DCR, token endpoint authentication), ``keys``
and ``jws`` (private_key_jwt), ``tokens`` (grants, refresh, revocation),
``discovery`` and ``flow`` (the state machines; ``flow_io`` what a flow is given and asks for).

How a client drives it (the I/O side is ``transports.http.oauth_client.OAuthHttp``):

* a 401 on an MCP request: ``bearer_challenge(www_authenticate_values)``. Holding
  tokens for the server, first re-read the resource metadata (``OAuthHttp.discover``)
  and compare issuers (``issuer_still_listed``): a server that moved to another
  authorization server voids the tokens and the registration bound to the old one.
  Same issuer and a refresh token: ``refresh_request``/``OAuthHttp.refresh``, then
  retry once. Otherwise a login is needed: an ``AuthorizationFlow`` with the
  challenge and the registrations kept per issuer (client credentials run it
  without a person, interactive logins wait for ``mcpd auth login``);
* a 403 with ``error="insufficient_scope"``: ``ScopeState.step_up`` gives the
  union to ask for (or ``StepUpLimit``), then a flow with ``scopes=`` that union;
  ``ScopeState.succeeded`` after the next request that goes through;
* before a request: ``TokenSet.should_refresh(now)`` refreshes ahead of expiry;
* on logout: ``revocation_request``/``OAuthHttp.revoke`` when the server offers it.
"""

from .authorize import (
    PendingAuthorization,
    Pkce,
    carries_state,
    parse_redirect,
    redirect_for_issuer,
    state_of,
)
from .challenge import BearerChallenge, bearer_challenge
from .discovery import Discovery, DiscoveryResult
from .errors import (
    CLIENT_REFUSED,
    AuthorizationDenied,
    BlockedUrl,
    NoAuthorizationMetadata,
    OAuthConfigError,
    OAuthError,
    OAuthProtocolError,
    OAuthUsageError,
    StepUpLimit,
    TokenEndpointError,
)
from .flow import AuthorizationFlow, FlowState
from .flow_io import (
    AuthorizationResult,
    Authorized,
    FlowConfig,
    FlowStep,
    OpenBrowser,
    SendRequest,
)
from .http import HttpRequest, HttpResponse
from .keys import SigningKey, load_signing_key
from .metadata import (
    AuthorizationServer,
    ResourceMetadata,
    ServerMetadata,
    issuer_still_listed,
)
from .registration import ClientConfig, ClientRegistration
from .scopes import ScopeState, check_scopes
from .secret import Secret
from .ssrf import FetchPolicy
from .tokens import (
    TokenSet,
    check_revocation,
    parse_token_response,
    refresh_request,
    revocation_request,
)

__all__ = [
    "CLIENT_REFUSED",
    "AuthorizationDenied",
    "AuthorizationFlow",
    "AuthorizationResult",
    "AuthorizationServer",
    "Authorized",
    "BearerChallenge",
    "BlockedUrl",
    "ClientConfig",
    "ClientRegistration",
    "Discovery",
    "DiscoveryResult",
    "FetchPolicy",
    "FlowConfig",
    "FlowState",
    "FlowStep",
    "HttpRequest",
    "HttpResponse",
    "NoAuthorizationMetadata",
    "OAuthConfigError",
    "OAuthError",
    "OAuthProtocolError",
    "OAuthUsageError",
    "OpenBrowser",
    "PendingAuthorization",
    "Pkce",
    "ResourceMetadata",
    "ScopeState",
    "Secret",
    "SendRequest",
    "ServerMetadata",
    "SigningKey",
    "StepUpLimit",
    "TokenEndpointError",
    "TokenSet",
    "bearer_challenge",
    "carries_state",
    "check_revocation",
    "check_scopes",
    "issuer_still_listed",
    "load_signing_key",
    "parse_redirect",
    "parse_token_response",
    "redirect_for_issuer",
    "refresh_request",
    "revocation_request",
    "state_of",
]
