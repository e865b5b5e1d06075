"""Token requests and answers: authorization code, refresh, client credentials,
revocation (RFC 6749 §4.1.3, §4.4, §6; RFC 7009), with ``resource`` (RFC 8707).

A token response becomes a ``TokenSet`` with an absolute expiry computed from the
``now`` the caller passes (``expires_at = now + expires_in``), the scopes granted
(the ones requested when the server does not say, RFC 6749 §5.1) and the issuer
and resource it belongs to. A lifetime past ``LONGEST_LIFETIME`` counts as none
stated, like an absent ``expires_in``; one under ``SHORTEST_LIFETIME`` is used that long.
An access token that is not an RFC 6750 ``b64token`` is refused: it could not be sent
as issued. A refresh answer without a new refresh token keeps the
old one. Only bearer tokens are accepted: a ``DPoP`` token would need proofs mcpd
does not make.

``TokenSet.store()``/``TokenSet.load()`` are the (secret-revealing) form for mcpd's
own credential store; everywhere else the secrets stay wrapped.
"""

from __future__ import annotations

import math
import string
from typing import Final, Literal

import msgspec

from .authorize import AuthorizationCode, PendingAuthorization, RandomSource, shown
from .challenge import split_scope
from .errors import OAuthProtocolError, TokenEndpointError
from .http import HttpRequest, HttpResponse, json_object, post_form
from .keys import SigningKey
from .metadata import AuthorizationServer, require_endpoint
from .registration import ClientRegistration, client_auth
from .scopes import scope_param
from .secret import Secret, check_issued, dec_hook, enc_hook

REFRESH_MARGIN: Final = 60.0
# The shortest lifetime a token is planned by: one stated shorter (0, or a few seconds)
# is used this long from its issue. Read literally it would have every message wait for
# a refresh first, doubling the requests to both servers, while clock skew and the round
# trip already make a lifetime of seconds meaningless; a server that does refuse the
# token in the meantime still has it renewed at once (the refusal's own path).
SHORTEST_LIFETIME: Final = 30.0
# A lifetime longer than this is taken as no stated expiry: a date that far out (or
# past any calendar) means nothing to plan a refresh by, and cannot even be shown.
LONGEST_LIFETIME: Final = 10 * 365 * 86400.0

_encoder: Final = msgspec.json.Encoder(enc_hook=enc_hook)
_B64TOKEN: Final = frozenset(string.ascii_letters + string.digits + "-._~+/")


class TokenSet(msgspec.Struct, frozen=True):
    access_token: Secret
    token_type: str = "Bearer"
    expires_at: float | None = None
    refresh_token: Secret | None = None
    scope: tuple[str, ...] | None = None  # granted
    requested_scope: tuple[str, ...] | None = None
    issuer: str = ""
    resource: str = ""
    obtained_at: float = 0.0

    def authorization(self) -> str:
        """The ``Authorization`` header value; reveals the token."""
        return f"Bearer {self.access_token.reveal()}"

    def _usable_until(self) -> float | None:
        if self.expires_at is None:
            return None
        return max(self.expires_at, self.obtained_at + SHORTEST_LIFETIME)

    def expired(self, now: float) -> bool:
        until = self._usable_until()
        return until is not None and now >= until

    def should_refresh(self, now: float) -> bool:
        """Time to refresh: within ``REFRESH_MARGIN`` seconds of expiry (at most half the
        token's lifetime, so a short-lived token is not refreshed at once)."""
        until = self._usable_until()
        if until is None or self.refresh_token is None:
            return False
        lifetime = until - self.obtained_at
        return now >= until - min(REFRESH_MARGIN, max(lifetime, 0.0) / 2)

    def store(self) -> bytes:
        return _encoder.encode(self)

    @classmethod
    def load(cls, data: bytes) -> TokenSet:
        return msgspec.json.decode(data, type=cls, dec_hook=dec_hook)


class _TokenAnswer(msgspec.Struct):
    access_token: str
    token_type: str
    expires_in: float | str | None = None
    refresh_token: str | None = None
    scope: str | None = None


def _request(
    server: AuthorizationServer,
    reg: ClientRegistration,
    fields: list[tuple[str, str]],
    purpose: str,
    *,
    key: SigningKey | None,
    now: float,
    random: RandomSource,
) -> HttpRequest:
    endpoint = require_endpoint(server, "token_endpoint")
    auth_fields, headers = client_auth(reg, server, key=key, now=now, random=random)
    return post_form(endpoint, [*fields, *auth_fields], purpose, headers)


def code_exchange_request(
    server: AuthorizationServer,
    reg: ClientRegistration,
    pending: PendingAuthorization,
    code: AuthorizationCode,
    *,
    key: SigningKey | None,
    now: float,
    random: RandomSource,
) -> HttpRequest:
    fields = [
        ("grant_type", "authorization_code"),
        ("code", code.code.reveal()),
        ("redirect_uri", pending.redirect_uri),
        ("code_verifier", pending.verifier.reveal()),
        ("resource", pending.resource),
    ]
    return _request(server, reg, fields, "token request", key=key, now=now, random=random)


def refresh_request(
    server: AuthorizationServer,
    reg: ClientRegistration,
    tokens: TokenSet,
    *,
    key: SigningKey | None,
    now: float,
    random: RandomSource,
) -> HttpRequest:
    if tokens.refresh_token is None:
        raise OAuthProtocolError("there is no refresh token; a new login is needed")
    fields = [
        ("grant_type", "refresh_token"),
        ("refresh_token", tokens.refresh_token.reveal()),
        ("resource", tokens.resource),
    ]
    return _request(server, reg, fields, "token refresh", key=key, now=now, random=random)


def client_credentials_request(
    server: AuthorizationServer,
    reg: ClientRegistration,
    *,
    resource: str,
    scopes: tuple[str, ...] | None,
    key: SigningKey | None,
    now: float,
    random: RandomSource,
) -> HttpRequest:
    fields = [("grant_type", "client_credentials")]
    scope = scope_param(scopes)
    if scope:
        fields.append(("scope", scope))
    fields.append(("resource", resource))
    return _request(
        server, reg, fields, "client credentials token request", key=key, now=now, random=random
    )


def _refusal(response: HttpResponse, what: str) -> TokenEndpointError:
    error: str | None = None
    description: str | None = None
    try:
        obj = json_object(response, what)
    except OAuthProtocolError:
        obj = {}
    if isinstance(said := obj.get("error"), str):
        error = said
    if isinstance(said := obj.get("error_description"), str):
        description = said
    detail = ""
    if error:
        detail = f", {shown(error)}" + (f": {shown(description)}" if description else "")
    hint = "; a new login is needed" if error == "invalid_grant" else ""
    refused = f"{what} was refused (HTTP {response.status}{detail})"
    return TokenEndpointError(
        refused + hint,
        status=response.status,
        error=error,
        description=description,
        refused=refused,
    )


def _is_b64token(token: str) -> bool:
    body = token.rstrip("=")
    return bool(body) and all(c in _B64TOKEN for c in body)


def _expires_in(value: float | str | None, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise OAuthProtocolError(f"{what}: expires_in is not a number") from None
    if math.isnan(value):
        raise OAuthProtocolError(f"{what}: expires_in is not a number")
    if value > LONGEST_LIFETIME:
        return None
    return max(0.0, float(value))


def parse_token_response(
    response: HttpResponse,
    server: AuthorizationServer,
    *,
    resource: str,
    requested: tuple[str, ...] | None,
    now: float,
    previous: TokenSet | None = None,
    grant: Literal["authorization_code", "refresh_token", "client_credentials"] = (
        "authorization_code"
    ),
) -> TokenSet:
    what = f"the {grant} request to {shown(server.metadata.token_endpoint or '')}"
    if response.status != 200:
        raise _refusal(response, what)
    obj = json_object(response, what)
    try:
        answer = msgspec.convert(obj, _TokenAnswer)
    except msgspec.ValidationError as exc:
        raise OAuthProtocolError(f"{what} returned an invalid token response: {exc}") from None
    if not answer.access_token:
        raise OAuthProtocolError(f"{what} returned an empty access token")
    check_issued(what, "access_token", answer.access_token)
    if not _is_b64token(answer.access_token):
        raise OAuthProtocolError(
            f"{what} returned an invalid token response: its access_token is not a bearer "
            "token (RFC 6750 b64token: letters, digits, -._~+/ and = only at its end), so "
            "mcpd could not send it as it was issued"
        )
    if answer.refresh_token:
        check_issued(what, "refresh_token", answer.refresh_token)
    if answer.token_type.lower() != "bearer":
        raise OAuthProtocolError(
            f"{what} returned a {shown(answer.token_type)} token; mcpd only uses bearer tokens"
        )
    expires_in = _expires_in(answer.expires_in, what)
    refresh = answer.refresh_token
    granted = split_scope(answer.scope)
    if granted is None:
        granted = previous.scope if previous is not None else requested
    return TokenSet(
        access_token=Secret(answer.access_token),
        token_type="Bearer",
        expires_at=None if expires_in is None else now + expires_in,
        refresh_token=Secret(refresh)
        if refresh
        else (previous.refresh_token if previous is not None else None),
        scope=granted,
        requested_scope=requested if previous is None else previous.requested_scope,
        issuer=server.issuer,
        resource=resource,
        obtained_at=now,
    )


def revocation_request(
    server: AuthorizationServer,
    reg: ClientRegistration,
    token: Secret,
    hint: Literal["refresh_token", "access_token"],
    *,
    key: SigningKey | None,
    now: float,
    random: RandomSource,
) -> HttpRequest | None:
    """The RFC 7009 request, or ``None`` when the server offers no revocation."""
    endpoint = server.metadata.revocation_endpoint
    if not endpoint:
        return None
    auth_fields, headers = client_auth(reg, server, key=key, now=now, random=random)
    fields = [("token", token.reveal()), ("token_type_hint", hint), *auth_fields]
    return post_form(endpoint, fields, "token revocation", headers)


def check_revocation(response: HttpResponse, server: AuthorizationServer) -> None:
    """RFC 7009 §2.2: 200 means revoked (or already invalid); anything else is an error."""
    if response.status != 200:
        raise _refusal(
            response, f"token revocation at {shown(server.metadata.revocation_endpoint or '')}"
        )
