"""The authorization request and its answer: PKCE, ``state``, the URL, the redirect.

mcpd sends the user's browser to the authorization endpoint with a PKCE S256
challenge (RFC 7636), an unguessable ``state``, the ``resource`` (RFC 8707) and the
chosen scopes. Everything needed to check the answer is kept in a
``PendingAuthorization``: the verifier, the state, and the issuer recorded from the
validated metadata (MCP requires recording it before redirecting).

The redirect is checked in this order, before its code goes anywhere:

1. ``iss`` (RFC 9207 §2.4 as MCP applies it): when present it must equal the
   recorded issuer by simple string comparison, whether or not the server
   advertises ``authorization_response_iss_parameter_supported``; when absent it
   is an error only if the server advertises it. No normalization: a trailing
   slash is a mismatch. On mismatch nothing else in the response is looked at,
   not even an ``error``;
2. ``state`` must be the one sent;
3. an ``error`` becomes ``AuthorizationDenied``; otherwise there must be a code.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable, Sequence
from typing import Final, TypeAlias
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import msgspec

from ..shown.visible import quote
from .errors import AuthorizationDenied, OAuthProtocolError
from .secret import Secret

RandomSource: TypeAlias = Callable[[int], bytes]

_VERIFIER_BYTES: Final = 32  # 43 characters of base64url, the RFC 7636 minimum length
_STATE_BYTES: Final = 24
_SHOWN_LIMIT: Final = 200


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def s256_challenge(verifier: str) -> str:
    return b64url(hashlib.sha256(verifier.encode("ascii")).digest())


def shown(text: str) -> str:
    """Text from a server (an error, an issuer, an endpoint), quoted for a sentence of
    mcpd's: in a message or a log line it reads as the server's and stays on one line."""
    return quote(text, _SHOWN_LIMIT)


# The most of a server's list (methods, algorithms it offers) a sentence names.
_LISTED: Final = 5


def shown_list(items: Sequence[str]) -> str:
    """A server's list for a sentence of mcpd's: its first few items, each quoted as
    ``shown``, and how many more there are; ``none`` when empty."""
    named = ", ".join(shown(item) for item in items[:_LISTED]) or "none"
    more = len(items) - _LISTED
    return named if more <= 0 else f"{named} and {more} more"


class Pkce(msgspec.Struct, frozen=True):
    verifier: Secret
    challenge: str

    @classmethod
    def create(cls, random: RandomSource = secrets.token_bytes) -> Pkce:
        verifier = b64url(random(_VERIFIER_BYTES))
        return cls(Secret(verifier), s256_challenge(verifier))


def new_state(random: RandomSource = secrets.token_bytes) -> str:
    return b64url(random(_STATE_BYTES))


class PendingAuthorization(msgspec.Struct, frozen=True):
    """One authorization request waiting for its redirect."""

    url: str  # where to send the user's browser
    state: Secret
    verifier: Secret
    issuer: str  # recorded from the validated metadata
    iss_supported: bool  # authorization_response_iss_parameter_supported
    redirect_uri: str
    client_id: str
    resource: str
    scopes: tuple[str, ...] | None


class AuthorizationCode(msgspec.Struct, frozen=True):
    code: Secret
    iss: str | None = None


def authorization_url(
    endpoint: str,
    *,
    client_id: str,
    redirect_uri: str,
    pkce: Pkce,
    state: str,
    resource: str,
    scope: str | None,
    prompt: str | None = None,
) -> str:
    if "#" in endpoint:
        raise OAuthProtocolError(f"authorization endpoint {shown(endpoint)} has a fragment")
    params = [
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect_uri),
        ("code_challenge", pkce.challenge),
        ("code_challenge_method", "S256"),
        ("state", state),
    ]
    if scope:
        params.append(("scope", scope))
    if prompt:
        params.append(("prompt", prompt))
    params.append(("resource", resource))
    joiner = "&" if urlsplit(endpoint).query else "?"
    return endpoint + joiner + urlencode(params)


_ISSUER_TAG_CHARS: Final = 16  # 96 bits of the issuer's digest


def redirect_for_issuer(base: str, issuer: str) -> str:
    """The redirect URI of a login at ``issuer``: ``base`` with a path segment drawn
    from the issuer. Each authorization server then sends its answers to an address of
    its own (RFC 9700 §4.4.2.2), so an answer from one that a hostile server steered
    the browser to arrives where no login at the hostile server waits, whether or not
    the honest one names itself with ``iss``."""
    tag = b64url(hashlib.sha256(issuer.encode()).digest())[:_ISSUER_TAG_CHARS]
    u = urlsplit(base)
    path = u.path if u.path.endswith("/") else u.path + "/"
    return urlunsplit((u.scheme, u.netloc, path + tag, u.query, ""))


def _same_target(received: str, redirect_uri: str) -> bool:
    got = urlsplit(received)
    want = urlsplit(redirect_uri)
    if not got.scheme and received.startswith("/"):  # a request target, as a listener sees it
        return got.path == want.path
    return (got.scheme.lower(), got.hostname, got.port, got.path) == (
        want.scheme.lower(),
        want.hostname,
        want.port,
        want.path,
    )


def _single(params: dict[str, list[str]], name: str) -> str | None:
    values = params.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise OAuthProtocolError(f"the authorization response carries {name} more than once")
    return values[0]


def check_iss(iss: str | None, pending: PendingAuthorization) -> None:
    if iss is None:
        if pending.iss_supported:
            raise OAuthProtocolError(
                f"the authorization response has no iss, although {shown(pending.issuer)} "
                "advertises it (RFC 9207); the response is discarded"
            )
        return
    if iss != pending.issuer:
        raise OAuthProtocolError(
            f"the authorization response comes from issuer {shown(iss)}, but the login "
            f"was started with {shown(pending.issuer)}; the response is discarded (RFC 9207)"
        )


def state_of(url: str) -> str | None:
    """The ``state`` a URL (or a request target) carries; None when it has none or
    more than one."""
    values = parse_qs(urlsplit(url).query, keep_blank_values=True).get("state", [])
    return values[0] if len(values) == 1 else None


def carries_state(received: str, state: str) -> bool:
    """Whether the redirect ``received`` answers the authorization request with
    this ``state``: only that one may end a login, whatever else reaches the
    redirect URI (another attempt, or someone else who can reach a loopback port)."""
    got = state_of(received)
    return got is not None and hmac.compare_digest(got.encode(), state.encode())


def parse_redirect(received: str, pending: PendingAuthorization) -> AuthorizationCode:
    """Validate the redirect back from the authorization server (a full URL or the
    request target a loopback listener received) and take its code."""
    if not _same_target(received, pending.redirect_uri):
        raise OAuthProtocolError(
            f"the redirect came back to {shown(urlsplit(received).path)}, not to "
            f"{shown(urlsplit(pending.redirect_uri).path)}, where this login's authorization "
            f"server {shown(pending.issuer)} answers: it is the answer of a login elsewhere "
            "(or of another authorization server a hostile one sent the browser on to), "
            "and its code is sent nowhere"
        )
    params = parse_qs(urlsplit(received).query, keep_blank_values=True)
    iss = _single(params, "iss")
    check_iss(iss, pending)
    state = _single(params, "state")
    if state is None or not hmac.compare_digest(state.encode(), pending.state.reveal().encode()):
        raise OAuthProtocolError(
            "the authorization response does not carry this login's state; "
            "it belongs to another attempt (start the login again)"
        )
    error = _single(params, "error")
    if error is not None:
        description = _single(params, "error_description")
        detail = f": {shown(description)}" if description else ""
        raise AuthorizationDenied(
            f"the authorization server refused the authorization ({shown(error)}){detail}",
            error=error,
            description=description,
        )
    code = _single(params, "code")
    if not code:
        raise OAuthProtocolError("the authorization response carries no code")
    return AuthorizationCode(Secret(code), iss)
