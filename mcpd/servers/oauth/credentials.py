"""What mcpd holds to authorize itself to one server, as bookkeeping (no I/O).

Per authorization server (keyed by its issuer): its metadata, the client identity
mcpd uses there and the tokens it was issued. Only one issuer is in use at a time;
when the server names another one, everything bound to the old one is dropped,
since a client id or a token of one authorization server means nothing at another.

A pre-registered client's secret lives in the configuration (``${file:...}``) and
is put back from there when needed, so the credential file never holds a copy.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Final
from urllib.parse import urlsplit

import msgspec

from protocol.oauth import (
    AuthorizationResult,
    AuthorizationServer,
    ClientConfig,
    ClientRegistration,
    DiscoveryResult,
    Secret,
    TokenSet,
    load_signing_key,
)
from protocol.shown.server_urls import display_url
from protocol.shown.visible import quote

from ...config.tables.servertable import AuthConfig
from ...local.state.oauth_store import IssuerRecord, StoredLogin
from ...login_answers import LoginStatus

# RFC 6749 §10.10: a token may be guessed with a probability of at most 2^-128, so it
# has at least this many characters of the widest alphabet a bearer token is written
# in. A shorter one was chosen, not drawn: an authorization server that issues
# "complete" would have that word masked in every server's replies.
SHORTEST_MASKED_TOKEN: Final = 22


def client_config(settings: AuthConfig | None) -> ClientConfig:
    if settings is None:
        return ClientConfig()
    key = settings.private_key
    machine = settings.type == "client_credentials"
    return ClientConfig(
        client_id=settings.client_id,
        client_secret=None if settings.client_secret is None else Secret(settings.client_secret),
        issuer=settings.issuer,
        auth_method=settings.token_endpoint_auth_method,
        signing_key=None if key is None else load_signing_key(key),
        metadata_url=settings.client_metadata_url,
        grant="client_credentials" if machine else "authorization_code",
    )


def _iso(at: float | None) -> str | None:
    if at is None:
        return None
    try:
        return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")
    except (OverflowError, ValueError, OSError):
        return None  # a time no calendar holds (a login saved before expiries were bounded)


class Replaced(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens a login took the place of, with what revoking them needs: their
    authorization server's metadata and the client they were issued to, secret
    included (None: not known)."""

    tokens: TokenSet
    server: AuthorizationServer | None
    client: ClientRegistration | None


class Credentials:
    def __init__(self, url: str, client: ClientConfig, scopes: tuple[str, ...] = ()) -> None:
        self.url = url
        self.client = client
        self.scopes = scopes  # the configured ones
        self.record = StoredLogin(server_url=url, configured_scopes=list(scopes))

    def restore(self, stored: StoredLogin) -> str | None:
        """Take what was saved if the configuration still fits it; else why not."""
        unfit = self._unfit(stored)
        if unfit is None:
            self.record = stored
        return unfit

    def _unfit(self, stored: StoredLogin) -> str | None:
        """Why a saved login is not for the configuration as it is now: another URL,
        or a client id, issuer or scopes the configuration no longer names (its
        secret, which the configuration holds, must not reach the old issuer)."""
        if stored.server_url != self.url:
            return (
                f"the saved login is for {display_url(stored.server_url)}, "
                f"not {display_url(self.url)}"
            )
        current = stored.current
        if current is None or current.tokens is None:
            return None  # no tokens to send anywhere
        reg = current.issued_to
        saved_id = reg.client_id if reg is not None else None
        wanted_id, wanted_issuer = self.client.client_id, self.client.issuer
        if (wanted_issuer is not None and wanted_issuer != stored.issuer) or (
            wanted_id is not None and wanted_id != saved_id
        ):
            now = _identity(wanted_id, wanted_issuer)
            return (
                f"the saved login is for {_identity(saved_id, stored.issuer)}; "
                f"the configuration now names {now}"
            )
        before = stored.configured_scopes
        dropped = [s for s in before or () if s not in self.scopes]
        if dropped:
            now = " ".join(self.scopes) or "none"
            return (
                f"the saved login was made for the scopes {quote(' '.join(before or ()))}; "
                f"the configuration now names {quote(now) if self.scopes else now}"
            )
        return None

    # -- what is in use --

    @property
    def issuer(self) -> str | None:
        return self.record.issuer

    @property
    def tokens(self) -> TokenSet | None:
        current = self.record.current
        return current.tokens if current is not None else None

    @property
    def server(self) -> AuthorizationServer | None:
        current = self.record.current
        return current.server if current is not None else None

    @property
    def header(self) -> str | None:
        tokens = self.tokens
        return tokens.authorization() if tokens is not None else None

    def registration(self) -> ClientRegistration | None:
        """The identity a login at the current issuer uses, secret included."""
        current = self.record.current
        return self._with_secret(current.registration if current is not None else None)

    def tokens_client(self) -> ClientRegistration | None:
        """The client the tokens in use were issued to, secret included: the one their
        refresh and their revocation authenticate as (None: no tokens, or a login
        saved without it)."""
        current = self.record.current
        if current is None or current.tokens is None:
            return None
        return self._with_secret(current.issued_to)

    def _with_secret(self, reg: ClientRegistration | None) -> ClientRegistration | None:
        if reg is not None and reg.source == "preregistered":
            return msgspec.structs.replace(reg, client_secret=self.client.client_secret)
        return reg

    def registrations(self) -> dict[str, ClientRegistration]:
        """Registrations mcpd made, per issuer (the flow keeps those registered for
        the redirect URI a login there uses)."""
        out = {}
        for issuer, entry in self.record.issuers.items():
            reg = entry.registration
            if reg is not None and reg.source == "dynamic":
                out[issuer] = reg
        return out

    def redirect_port(self, configured: int) -> int:
        """The port to listen on for a login: the configured one, else the one the
        current registration was made with (so it can be used again), else any."""
        if configured:
            return configured
        for issuer in [self.issuer, *self.record.issuers]:
            entry = self.record.issuers.get(issuer) if issuer is not None else None
            reg = entry.registration if entry is not None else None
            for uri in reg.redirect_uris if reg is not None else ():
                with contextlib.suppress(ValueError):
                    port = urlsplit(uri).port
                    if port:
                        return port
        return 0

    # -- changes --

    def adopt(self, result: AuthorizationResult) -> Replaced | None:
        """A finished authorization: its issuer is the one in use from now on. The
        tokens it takes the place of that are to be revoked, with what that needs
        (None: none, see ``_replaced``)."""
        replaced = self._replaced(result)
        issuer = result.discovery.issuer
        reg = result.registration
        if reg.source == "preregistered":
            reg = msgspec.structs.replace(reg, client_secret=None)
        entry = self.record.issuers.setdefault(issuer, IssuerRecord())
        entry.server = result.discovery.server
        entry.registration = reg
        entry.tokens = result.tokens
        entry.tokens_client = None
        self.record.issuer = issuer
        self.record.configured_scopes = list(self.scopes)
        return replaced

    def _replaced(self, result: AuthorizationResult) -> Replaced | None:
        """The tokens in use before ``result`` when they were issued to another client
        or at another issuer, which nothing will use again: to be revoked at their
        issuer as their client (held at another issuer, they are dropped there). None
        when there are none, or they are of the client ``result`` logged in as at the
        same issuer: they are dropped unrevoked."""
        current = self.record.current
        old = current.tokens if current is not None else None
        if current is None or old is None:
            return None
        client = self.tokens_client()
        if self.record.issuer == result.discovery.issuer:
            # Revoking a token of the client the new login is of (or of a client not
            # known, which may be that one) could end the new login too: an authorization
            # server may revoke a client's whole grant when one of its tokens is revoked.
            if client is None or client.client_id == result.registration.client_id:
                return None
            return Replaced(tokens=old, server=result.discovery.server, client=client)
        server = current.server
        current.tokens = current.tokens_client = None
        return Replaced(tokens=old, server=server, client=client)

    def replace_tokens(self, tokens: TokenSet) -> None:
        """Tokens a refresh brought, issued to the client that asked for them."""
        current = self.record.current
        if current is not None:
            current.tokens = tokens

    def drop_tokens(self) -> None:
        current = self.record.current
        if current is not None:
            current.tokens = current.tokens_client = None

    def drop_all_tokens(self) -> None:
        for entry in self.record.issuers.values():
            entry.tokens = entry.tokens_client = None

    def drop_refresh_token(self) -> None:
        tokens = self.tokens
        if tokens is not None and tokens.refresh_token is not None:
            self.replace_tokens(msgspec.structs.replace(tokens, refresh_token=None))

    def forget_registered_client(self, issuer: str | None = None) -> str | None:
        """Drop the client mcpd registered at ``issuer`` (None: the one in use), so that
        the next login there registers anew: the client id it had, or None when there is
        no client mcpd registered (a configured one is the person's to change). Tokens
        issued to it keep it until they are dropped: they are refreshed and revoked as
        the client they were issued to, which the authorization server may still accept."""
        entry = self.record.issuers.get(issuer or self.record.issuer or "")
        reg = entry.registration if entry is not None else None
        if entry is None or reg is None or reg.source != "dynamic":
            return None
        entry.registration = None
        if entry.tokens is not None and entry.tokens_client is None:
            entry.tokens_client = reg
        return reg.client_id

    def forget_registered_clients(self) -> list[str]:
        """Drop every client mcpd registered, at any issuer; their client ids."""
        dropped = []
        for entry in self.record.issuers.values():
            reg = entry.registration
            if reg is not None and reg.source == "dynamic":
                entry.registration = None
                dropped.append(reg.client_id)
        return dropped

    def moved(self, discovery: DiscoveryResult) -> None:
        """The server now names another authorization server: everything of the old
        one is void (its client id must not be shown to the new one)."""
        old = self.record.issuer
        if old is not None:
            self.record.issuers.pop(old, None)
        self.record.issuers.setdefault(discovery.issuer, IssuerRecord()).server = discovery.server
        self.record.issuer = discovery.issuer

    def to_mask(self) -> list[str]:
        """The tokens in use and the client secrets authorization servers issued to mcpd
        at registration (a configured one is masked as config), those that could be a
        secret at all (see ``SHORTEST_MASKED_TOKEN``); reveals them."""
        held: list[Secret] = []
        tokens = self.tokens
        if tokens is not None:
            held.append(tokens.access_token)
            if tokens.refresh_token is not None:
                held.append(tokens.refresh_token)
        for entry in self.record.issuers.values():
            for reg in (entry.registration, entry.tokens_client):
                if reg is None or reg.source == "preregistered":
                    continue
                if reg.client_secret is not None:
                    held.append(reg.client_secret)
        return [v for v in (t.reveal() for t in held) if len(v) >= SHORTEST_MASKED_TOKEN]

    def has_tokens_saved(self) -> bool:
        return any(e.tokens is not None for e in self.record.issuers.values())

    # -- what people see (never a token) --

    def client_id(self) -> str | None:
        """The login's client while there is one, else the one the next login uses."""
        client = self.tokens_client() or self.registration() or _NO_REG
        return client.client_id or None

    def shown(self, status: LoginStatus, now: float) -> LoginStatus:
        """``status`` with what the tokens held say of the login: left as it is
        without tokens, whose fields are then unset."""
        tokens = self.tokens
        if tokens is None:
            return status
        held = tokens.refresh_token is not None
        status.scopes = list(tokens.scope or ())
        status.expires_at = _iso(tokens.expires_at)
        status.expired = tokens.expired(now)
        status.refresh_token = held
        # A refresh token is of no use without the client it was issued to.
        status.refreshable = held and self.tokens_client() is not None
        status.obtained_at = _iso(tokens.obtained_at or None)
        return status


_NO_REG = ClientRegistration(issuer="", client_id="")


def _identity(client_id: str | None, issuer: str | None) -> str:
    """A client at an authorization server, as a sentence names it."""
    who = f"client {quote(client_id)}" if client_id is not None else "a client mcpd registered"
    return f"{who} at the issuer {quote(issuer)}" if issuer is not None else who
