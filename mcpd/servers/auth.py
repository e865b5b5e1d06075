"""One HTTP server's authorization: a token on every request, renewed in time and
after a refusal, and a person's login when nothing else helps.

``ServerAuth`` is the transport's ``AuthHook``. Before a message it hands out the
access token, refreshing it first when it is about to expire; after a 401 it
re-reads the server's resource metadata (a server that moved to another
authorization server voids everything of the old one), then refreshes or, for a
machine identity, asks for a new token with the client credentials; after a 403
``insufficient_scope`` it asks for the union of the scopes (a bounded number of
times). One renewal runs at a time per server: whoever comes while it runs waits
for it (within their own time limit) and then uses its token, so fifty calls that
meet an expired token cost one token request.

When only a person can help (no token, a refresh token that was revoked, more
scope wanted) it raises ``LoginRequired``, and the server waits in its own state,
``needs_login``, until ``mcpd auth login`` has run (``servers.login``).
Tokens never appear in a message, a log line or a status: they leave this module
only as the header value handed to the transport.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable
from typing import Any, Final

import trio

from protocol.logfields import log_extra
from protocol.oauth import (
    AuthorizationFlow,
    AuthorizationResult,
    BearerChallenge,
    DiscoveryResult,
    FetchPolicy,
    FlowConfig,
    OAuthError,
    OpenBrowser,
    ScopeState,
    StepUpLimit,
    TokenEndpointError,
    TokenSet,
    bearer_challenge,
    issuer_still_listed,
)
from transports.base import AuthError, TransportError
from transports.oauth_http import OAuthHttp

from ..config.model import Config, ServerConfig
from ..host.statefile import state_dir
from ..host.tokens import TokenStore
from .credentials import Credentials, client_config

logger = logging.getLogger("mcpd.auth")

# After an early refresh failed, how long the current token is used before trying again.
RETRY_EARLY_REFRESH: Final = 10.0
# A token request is not abandoned halfway when its caller gives up: a refresh token
# the server rotated but mcpd never saw would cost a login. This bounds it instead.
TOKEN_REQUEST_TIMEOUT: Final = 10.0
_GRANT_GONE: Final = (
    "the authorization server no longer accepts mcpd's refresh token (it was revoked or expired)"
)
# A token without a refresh token is shown as expiring this long before it ends.
EXPIRING: Final = 600.0


class LoginRequired(TransportError):
    """Only a person can help (``mcpd auth login ALIAS``). Not a failure of the server:
    it is not retried with backoff and not counted by the circuit breaker."""


class AuthFailed(TransportError):
    """A token could not be obtained or renewed; the reason says why."""


async def _no_browser(action: OpenBrowser) -> str:
    raise AssertionError("the client credentials grant has no browser step")


class ServerAuth:
    def __init__(
        self,
        alias: str,
        cfg: ServerConfig,
        store: TokenStore,
        *,
        http: OAuthHttp | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        assert cfg.url is not None
        self.alias = alias
        self.url = cfg.url
        self.settings = cfg.auth
        # A configured Authorization header is the user's own choice of credentials.
        self.enabled = cfg.auth is not None or not any(
            name.lower() == "authorization" for name in cfg.headers
        )
        self.kind = cfg.auth.type if cfg.auth is not None else "oauth"
        self.creds = Credentials(cfg.url, client_config(cfg.auth))
        self._store = store
        self.clock = clock
        self.http = http or OAuthHttp(
            label=f"{alias}: authorization",
            ssl_context=_tls(cfg),
            connect_timeout=cfg.connect_timeout,
            timeout=TOKEN_REQUEST_TIMEOUT,
            clock=lambda: self.clock(),  # token expiry and this module's checks agree
        )
        self._loaded = False
        self.lock = trio.Lock()
        self._policy: FetchPolicy | None = None
        self.challenge: BearerChallenge | None = None
        self._scopes = ScopeState()
        self._wanted: tuple[str, ...] | None = None  # the union a step-up asks for
        self._retry_early_at = 0.0
        self._grant_gone = False  # the refresh token was refused; the access token lives on
        self._changed = trio.Event()
        # Why a person has to log in, with the command to do it; None while not.
        self.needs_login: str | None = None
        self.on_change: Callable[[], None] = lambda: None

    @classmethod
    def for_server(cls, alias: str, cfg: ServerConfig, config: Config) -> ServerAuth:
        return cls(alias, cfg, TokenStore(state_dir(config)))

    # -- the transport's hook --

    async def authorization(self) -> str | None:
        if not self.enabled:
            return None
        if not self._loaded:
            async with self.lock:
                await self.load()
        if self.needs_login is not None:
            raise LoginRequired(self.needs_login)
        tokens = self.creds.tokens
        if tokens is not None and self._due(tokens):
            async with self.lock:
                tokens = self.creds.tokens
                if tokens is not None and self._due(tokens):
                    await self._renew_early(tokens)
        return self.creds.header

    async def refused(self, error: AuthError, sent: str | None) -> str | None:
        if not self.enabled:
            return None
        challenge = bearer_challenge([error.challenge]) if error.challenge else None
        if error.challenge and challenge is None:
            return None  # another scheme (Basic, ...): nothing OAuth can answer
        if error.status == 403:
            if challenge is None or not challenge.insufficient_scope:
                return None
            return await self._step_up(challenge, sent)
        if error.status != 401:
            return None
        if challenge is not None:
            self.challenge = challenge
        async with self.lock:
            await self.load()
            if self.needs_login is not None:
                raise LoginRequired(self.needs_login)
            current = self.creds.header
            if current is not None and current != sent:
                return current  # renewed while this message was on its way
            tokens = self.creds.tokens
            if tokens is None:
                if self.kind == "client_credentials":
                    await self.client_credentials(challenge)
                    return self.creds.header
                raise self.lost("the server asks for a login")
            moved = await self._moved(challenge)
            if moved is not None:
                if self.kind == "client_credentials":
                    await self.client_credentials(challenge, discovery=moved)
                    return self.creds.header
                raise self.lost(
                    f"the server moved to the authorization server {moved.issuer}, "
                    "where mcpd has no login yet"
                )
            await self._renew(tokens, refused=True)
            return self.creds.header

    def accepted(self, sent: str | None) -> None:
        if self._scopes.step_ups and sent is not None and sent == self.creds.header:
            self._scopes = self._scopes.succeeded()

    # -- renewing --

    def _due(self, tokens: TokenSet) -> bool:
        now = self.clock()
        if now < self._retry_early_at:
            return False
        if self.kind == "client_credentials" and tokens.expired(now):
            return True
        return tokens.should_refresh(now)

    async def _renew_early(self, tokens: TokenSet) -> None:
        try:
            await self._renew(tokens, refused=False)
        except AuthFailed as exc:
            now = self.clock()
            if tokens.expired(now):
                raise
            self._retry_early_at = now + RETRY_EARLY_REFRESH
            logger.warning(
                "%s: could not refresh the access token ahead of its expiry (%s); "
                "using the current one meanwhile",
                self.alias,
                exc.reason,
                extra=log_extra(self.alias, "token_refresh_failed", exc.reason),
            )

    async def _renew(self, tokens: TokenSet, *, refused: bool) -> None:
        """A new token for the issuer in use (called with the lock held)."""
        server, reg = self.creds.server, self.creds.registration()
        if tokens.refresh_token is not None and server is not None and reg is not None:
            policy = await self.policy()
            try:
                with trio.CancelScope(shield=True):
                    fresh = await self.http.refresh(
                        server, reg, tokens, policy, key=self.creds.client.signing_key
                    )
            except TokenEndpointError as exc:
                if not exc.needs_login:
                    raise AuthFailed(f"cannot refresh the access token: {exc}") from None
                if not refused and not tokens.expired(self.clock()):
                    # The grant is gone, but the access token still works for a while.
                    self._grant_gone = True
                    self.creds.drop_refresh_token()
                    await self.save()
                    logger.warning(
                        "%s: the refresh token was refused; the access token works until "
                        "it expires, then a login is needed",
                        self.alias,
                        extra=log_extra(self.alias, "refresh_refused"),
                    )
                    return
                self.creds.drop_tokens()
                await self.save()
                raise self.lost(_GRANT_GONE) from None
            except (TransportError, OAuthError) as exc:
                raise AuthFailed(f"cannot refresh the access token: {why(exc)}") from None
            self.creds.replace_tokens(fresh)
            await self.save()
            logger.info(
                "%s: access token refreshed", self.alias, extra=log_extra(self.alias, "refreshed")
            )
            return
        if self.kind == "client_credentials":
            await self.client_credentials(self.challenge)
            return
        if refused or tokens.expired(self.clock()):
            self.creds.drop_tokens()
            await self.save()
            if self._grant_gone:
                raise self.lost(_GRANT_GONE)
            raise self.lost(
                "the server no longer accepts mcpd's access token (it expired or was "
                "revoked) and there is no refresh token"
            )

    async def _moved(self, challenge: BearerChallenge | None) -> DiscoveryResult | None:
        """Re-read the resource metadata: the new discovery if the server now names
        another authorization server (everything bound to the old one is dropped)."""
        issuer = self.creds.issuer
        if issuer is None:
            return None
        try:
            discovery = await self.http.discover(
                self.url, challenge, await self.policy(), known_issuers=(issuer,)
            )
        except (TransportError, OAuthError) as exc:
            logger.info(
                "%s: could not re-read the authorization metadata: %s",
                self.alias,
                why(exc),
                extra=log_extra(self.alias),
            )
            return None
        prm = discovery.resource_metadata
        if prm is None or issuer_still_listed(issuer, prm):
            return None
        self.creds.moved(discovery)
        await self.save()
        logger.warning(
            "%s: the server moved from the authorization server %s to %s",
            self.alias,
            issuer,
            discovery.issuer,
            extra=log_extra(self.alias, "authorization_server_moved", discovery.issuer),
        )
        return discovery

    async def _step_up(self, challenge: BearerChallenge, sent: str | None) -> str | None:
        async with self.lock:
            if self.needs_login is not None:
                raise LoginRequired(self.needs_login)
            current = self.creds.header
            if current is not None and current != sent:
                return current
            try:
                state, scopes = self._scopes.step_up(challenge)
            except StepUpLimit:
                wanted = " ".join(challenge.scope or ()) or "more scope"
                raise AuthFailed(
                    f"the server still refuses for insufficient scope after "
                    f"{self._scopes.step_ups} new authorization(s) (it asks for {wanted}); "
                    "mcpd asks for no more until a request goes through"
                ) from None
            self._scopes, self._wanted, self.challenge = state, scopes, challenge
            if self.kind == "client_credentials":
                await self.client_credentials(challenge, scopes=scopes)
                return self.creds.header
            wanted = " ".join(challenge.scope or ()) or "a wider scope"
            raise self.lost(f"the server asks for more permissions ({wanted})")

    async def client_credentials(
        self,
        challenge: BearerChallenge | None,
        *,
        scopes: tuple[str, ...] | None = None,
        discovery: DiscoveryResult | None = None,
    ) -> None:
        policy = await self.policy()
        try:
            flow = AuthorizationFlow(
                FlowConfig(self.url, client=self.creds.client),
                policy=policy,
                now=self.clock(),
                challenge=challenge,
                scopes=scopes or self.login_scopes(),
                registrations=self.creds.registrations(None),
                discovery=discovery,
            )
            result = await self.http.run_flow(flow, policy, _no_browser)
        except TokenEndpointError as exc:
            raise AuthFailed(f"the client credentials were refused: {exc}") from None
        except (TransportError, OAuthError) as exc:
            raise AuthFailed(f"cannot get an access token: {why(exc)}") from None
        await self.adopt(result, result.tokens.requested_scope)

    async def wait_changed(self) -> None:
        """Until a login finished (or a logout)."""
        await self._changed.wait()

    # -- what people see --

    def status(self) -> dict[str, Any]:
        now = self.clock()
        out: dict[str, Any] = {
            "server": self.alias,
            "type": self.kind if self.enabled else "header",
            "url": self.url,
            **self.creds.summary(now),
            "needs_login": self.needs_login,
            "redirect_port": self.creds.redirect_port(
                self.settings.redirect_port if self.settings else 0
            ),
        }
        out["state"] = self._state(now)
        return out

    def _state(self, now: float) -> str:
        tokens = self.creds.tokens
        if self.needs_login is not None:
            return "needs_login"
        if tokens is None:
            return "not_logged_in"
        if tokens.refresh_token is None and self.kind != "client_credentials":
            if tokens.expired(now):
                return "expired"
            if tokens.expires_at is not None and tokens.expires_at - now < EXPIRING:
                return "expiring"
        return "logged_in"

    # -- helpers --

    async def load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        stored = await self._store.load(self.alias)
        if stored is not None and not self.creds.restore(stored):
            logger.info(
                "%s: the saved login is for %s, not %s; it is not used",
                self.alias,
                stored.server_url,
                self.url,
                extra=log_extra(self.alias),
            )

    async def adopt(self, result: AuthorizationResult, requested: tuple[str, ...] | None) -> None:
        self.creds.adopt(result)
        self._grant_gone = False
        self._scopes = self._scopes.authorized(requested)
        self._wanted = None
        await self.save()
        if self.needs_login is not None or self.kind != "client_credentials":
            self.needs_login = None
            self._notify()

    async def save(self) -> None:
        try:
            await self._store.save(self.alias, self.creds.record)
        except OSError as exc:
            logger.error(
                "%s: cannot save the login to %s: %s (it is kept in memory only)",
                self.alias,
                self._store.path(self.alias),
                exc.strerror or exc,
                extra=log_extra(self.alias, "token_file", str(exc.strerror or exc)),
            )

    def lost(self, why: str) -> LoginRequired:
        self.needs_login = f"{why}; run `mcpd auth login {self.alias}`"
        self._notify()
        return LoginRequired(self.needs_login)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()
        self.on_change()

    def login_scopes(self) -> tuple[str, ...] | None:
        configured = tuple(self.settings.scopes or ()) if self.settings is not None else ()
        union = tuple(dict.fromkeys((*configured, *(self._wanted or ()))))
        return union or None

    async def policy(self) -> FetchPolicy:
        if self._policy is None:
            self._policy = await self.http.policy_for(self.url)
        return self._policy


def why(exc: Exception) -> str:
    return exc.reason if isinstance(exc, TransportError) else str(exc)


def _tls(cfg: ServerConfig) -> ssl.SSLContext | None:
    if cfg.url is None or not cfg.url.lower().startswith("https:"):
        return None
    ctx = ssl.create_default_context(cafile=cfg.ca_file)
    if not cfg.tls_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx
