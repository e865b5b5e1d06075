"""One HTTP server's authorization: a token on every request, renewed in time and
after a refusal, and a person's login when nothing else helps.

``ServerAuth`` is the transport's ``AuthHook``. Before a message it hands out the
access token, refreshing it first when it is about to expire; after a 401 it
re-reads the server's resource metadata (a server that moved to another
authorization server voids everything of the old one), then refreshes or, for a
machine identity, asks for a new token with the client credentials (also when its
refresh token is refused); after a 403 ``insufficient_scope`` it asks for the union
of the scopes (a bounded number of times, and for a machine identity never beyond
its configured ones). One renewal runs at a time per server: whoever comes while it runs waits
for it (within their own time limit) and then uses its token, so fifty calls that
meet an expired token cost one token request. A refresh whose request is out runs
to its answer, which is kept (the authorization server may have replaced the refresh
token it was sent): a caller that gives up does not end it, the server's stop waits
for it (``stop``).

When only a person can help (a person's login: no token, a refresh token that was
revoked, more scope wanted) it raises ``LoginRequired``, and the server waits in its own state,
``needs_login``, until ``mcpd auth login`` has run (``servers.oauth.login``).
Tokens never appear in a message, a log line or a status: they leave this module
only as the header value handed to the transport.

What it keeps (credentials and their file, ``needs_login``, the lock, the status)
is ``AuthState``'s, in ``state``, which the person's login shares; this module
is the deciding: when to renew, how, and when to give up and ask for a login.
"""

from __future__ import annotations

import logging
from typing import Final

import trio

from protocol.oauth import (
    AuthorizationFlow,
    AuthorizationServer,
    BearerChallenge,
    ClientRegistration,
    DiscoveryResult,
    FetchPolicy,
    FlowConfig,
    OAuthError,
    OpenBrowser,
    StepUpLimit,
    TokenEndpointError,
    TokenSet,
    bearer_challenge,
)
from protocol.shown.logfields import log_extra
from protocol.shown.visible import quote
from transports.base import AuthHook
from transports.errors import AuthError, RequestUnanswered, TransportError

from ...config.tables.model import Config
from ...config.tables.servertable import ServerConfig
from ...local.state.oauth_store import OAuthStore
from ...local.state.statefile import state_dir
from .errors import AuthFailed, LoginRequired, scope_words, why
from .moving import moved_away
from .state import AuthState

__all__ = ["AuthFailed", "LoginRequired", "ServerAuth", "why"]

logger = logging.getLogger("mcpd.auth")

# After an early refresh failed, how long the current token is used before trying again.
RETRY_EARLY_REFRESH: Final = 10.0
# What a stop waits past the token request's time limit: the saving of its answer.
SAVE_GRACE: Final = 2.0
_GRANT_GONE: Final = (
    "the authorization server no longer accepts mcpd's refresh token (it was revoked or expired)"
)
_MAY_BE_USED: Final = "an earlier refresh got no answer and may have used it up"
_CLIENT_GONE: Final = (
    "the access token expired, and the client it was issued to was forgotten when the "
    "authorization server refused it"
)


async def _no_browser(action: OpenBrowser) -> str:
    raise AssertionError("the client credentials grant has no browser step")


class ServerAuth(AuthState, AuthHook):
    # Set when the refresh under way has ended and its outcome is kept; None while
    # none is under way. The server's stop waits for it (``stop``).
    _refresh_over: trio.Event | None = None
    # Once the server stops, nothing asks for a token: a refusal then is no reason
    # to renew, and a refresh token spent now would be one the next start lacks.
    _stopped = False
    # A refresh was sent and got no answer: the server may have spent its token.
    _unanswered = False

    @classmethod
    def for_server(cls, alias: str, cfg: ServerConfig, config: Config) -> ServerAuth:
        return cls(alias, cfg, OAuthStore(state_dir(config)))

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
            seen = self.token_work
            async with self.lock:
                tokens = self.creds.tokens
                if tokens is not None and self._due(tokens):
                    failed = self.failed_since(seen)
                    if failed is not None:
                        raise failed
                    await self._renew_early(tokens)
        return self.creds.header

    async def refused(self, error: AuthError, sent: str | None) -> str | None:
        if not self.enabled or self._stopped:
            return None
        self.refused_from(error.peer)
        challenge = bearer_challenge([error.challenge]) if error.challenge else None
        if error.challenge and challenge is None:
            return None  # another scheme (Basic, ...): nothing OAuth can answer
        self.refuse_bad_scope(challenge, error.status)
        if error.status == 403:
            if challenge is None or not challenge.insufficient_scope:
                return None
            return await self._step_up(challenge, sent)
        if error.status != 401:
            return None
        if challenge is not None:
            self.challenge = challenge
        seen = self.token_work
        async with self.lock:
            if self._stopped:
                return None
            await self.load()
            if self.needs_login is not None:
                raise LoginRequired(self.needs_login)
            current = self.creds.header
            if current is not None and current != sent:
                return current  # renewed while this message was on its way
            failed = self.failed_since(seen)
            if failed is not None:
                raise failed
            tokens = self.creds.tokens
            if tokens is None:
                if self.kind == "client_credentials":
                    await self.client_credentials(challenge)
                    return self.creds.header
                if self.settings is None and (
                    challenge is None or challenge.resource_metadata is None
                ):
                    raise self.unclear_refusal(challenge)
                raise self.lost(self.no_login())
            moved = await moved_away(self, challenge)
            if moved is not None:
                if self.kind == "client_credentials":
                    await self.client_credentials(challenge, discovery=moved)
                    return self.creds.header
                raise self.lost(
                    f"the server moved to the authorization server {quote(moved.issuer)}, "
                    "where mcpd has no login yet"
                )
            await self._renew(tokens, refused=True)
            return self.creds.header

    async def refused_again(self, error: AuthError, sent: str | None) -> None:
        # A logout under way revokes the token a renewal just brought: once it is
        # over, the refusal is the logout's, and says so.
        if not self.enabled or self._stopped or error.status != 401:
            return
        async with self.lock:
            if self.needs_login is not None:
                raise LoginRequired(self.needs_login)

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
        if self._stopped:
            raise AuthFailed("the server stops: no new token is asked for")
        with self.renewing():
            await self._renew_now(tokens, refused=refused)

    async def _renew_now(self, tokens: TokenSet, *, refused: bool) -> None:
        server, reg = self.creds.server, self.creds.tokens_client()
        if tokens.refresh_token is not None and server is not None and reg is not None:
            try:
                policy = await self.policy()
            except (TransportError, OAuthError) as exc:
                raise AuthFailed(f"cannot refresh the access token: {why(exc)}") from None
            # Once the request is out, its answer is waited for and kept whatever is
            # cancelled meanwhile, the server's stop included: servers rotate refresh
            # tokens, so the one it replaces may already be void. The token request's
            # own time limit bounds the wait.
            over = self._refresh_over = trio.Event()
            try:
                with trio.CancelScope(shield=True):
                    renewed = await self._refresh(server, reg, tokens, policy, refused=refused)
            finally:
                self._refresh_over = None
                over.set()
            if renewed:
                return
        if self.kind == "client_credentials":
            await self.client_credentials(self.challenge)
            return
        if refused or tokens.expired(self.clock()):
            self.creds.drop_tokens()
            await self.save()
            if self._refresh_lost is not None:
                raise self.lost(self._refresh_lost)
            if tokens.refresh_token is not None and reg is None:
                raise self.lost(_CLIENT_GONE)
            raise self.lost(
                "the server no longer accepts mcpd's access token (it expired or was "
                "revoked) and there is no refresh token"
            )

    async def _refresh(
        self,
        server: AuthorizationServer,
        reg: ClientRegistration,
        tokens: TokenSet,
        policy: FetchPolicy,
        *,
        refused: bool,
    ) -> bool:
        """The refresh request and the keeping of its outcome (run shielded): False
        when the grant is gone and a machine identity asks for a new one with its
        own credentials instead, as no person is needed for that."""
        try:
            fresh = await self.http.refresh(
                server, reg, tokens, policy, key=self.creds.client.signing_key
            )
        except TokenEndpointError as exc:
            if exc.client_refused:
                if not refused and not tokens.expired(self.clock()):
                    # It may be passing (a node of the server without the client): the
                    # access token still works, and the refresh is tried again later.
                    raise AuthFailed(f"cannot refresh the access token: {exc.refused}") from None
                raise await self.client_refused(reg, exc) from None
            if not exc.needs_login:
                raise AuthFailed(f"cannot refresh the access token: {exc}") from None
            if not refused and not tokens.expired(self.clock()):
                # The grant is gone, but the access token still works for a while.
                self._refresh_lost = _GRANT_GONE
                self.creds.drop_refresh_token()
                await self.save()
                then = (
                    "a new one is asked for with the client credentials"
                    if self.kind == "client_credentials"
                    else "a login is needed"
                )
                logger.warning(
                    "%s: the refresh token was refused; the access token works until "
                    "it expires, then %s",
                    self.alias,
                    then,
                    extra=log_extra(self.alias, "refresh_refused"),
                )
                return True
            self.creds.drop_tokens()
            await self.save()
            if self.kind == "client_credentials":
                logger.info(
                    "%s: the refresh token was refused; asking for a new token with the "
                    "client credentials",
                    self.alias,
                    extra=log_extra(self.alias, "refresh_refused"),
                )
                return False
            if self._unanswered:
                raise self.lost(f"{_GRANT_GONE}; {_MAY_BE_USED}") from None
            raise self.lost(_GRANT_GONE) from None
        except RequestUnanswered as exc:
            self._unanswered = True
            raise AuthFailed(
                f"cannot refresh the access token: {exc.reason}; the authorization server "
                "may have used up the refresh token mcpd sent, and if the next refresh is "
                "refused a login is needed"
            ) from None
        except (TransportError, OAuthError) as exc:
            raise AuthFailed(f"cannot refresh the access token: {why(exc)}") from None
        self._unanswered = False
        self.creds.replace_tokens(fresh)
        await self.save()
        logger.info(
            "%s: access token refreshed", self.alias, extra=log_extra(self.alias, "refreshed")
        )
        return True

    async def stop(self) -> None:
        """The server stops: nothing asks for a token from now on, and a refresh
        whose request is out is waited for, within the token request's time limit,
        so that the refresh token it brings is kept."""
        self._stopped = True
        over = self._refresh_over
        if over is None:
            return
        logger.info(
            "%s: the server stops once the token refresh under way is answered (within %g s)",
            self.alias,
            self.token_timeout,
            extra=log_extra(self.alias, "refresh_awaited"),
        )
        with trio.move_on_after(self.token_timeout + SAVE_GRACE, shield=True):
            await over.wait()

    async def _step_up(self, challenge: BearerChallenge, sent: str | None) -> str | None:
        async with self.lock:
            if self.needs_login is not None:
                raise LoginRequired(self.needs_login)
            current = self.creds.header
            if current is not None and current != sent:
                return current
            self.refuse_scope_beyond_configured(challenge)
            try:
                state, scopes = self.scopes_before_step_up().step_up(challenge)
            except StepUpLimit:
                wanted = scope_words(challenge, "more scope")
                raise AuthFailed(
                    f"the server still refuses for insufficient scope after "
                    f"{self._scopes.step_ups} new authorization(s) (it asks for {wanted}); "
                    "mcpd asks for no more until a request goes through"
                ) from None
            self._scopes, self._wanted, self.challenge = state, scopes, challenge
            if self.kind == "client_credentials":
                await self.client_credentials(challenge, scopes=scopes)
                return self.creds.header
            wanted = scope_words(challenge, "a wider scope")
            raise self.lost(f"the server asks for more permissions ({wanted})")

    async def client_credentials(
        self,
        challenge: BearerChallenge | None,
        *,
        scopes: tuple[str, ...] | None = None,
        discovery: DiscoveryResult | None = None,
    ) -> None:
        try:
            policy = await self.policy()
            flow = AuthorizationFlow(
                FlowConfig(self.url, client=self.creds.client, allow_legacy=self.allow_legacy),
                policy=policy,
                now=self.clock(),
                challenge=challenge,
                scopes=scopes or self.login_scopes(),
                registrations=self.creds.registrations(),
                discovery=discovery,
            )
            result = await self.http.run_flow(flow, policy, _no_browser)
        except TokenEndpointError as exc:
            raise AuthFailed(f"the client credentials were refused: {exc}") from None
        except (TransportError, OAuthError) as exc:
            raise AuthFailed(f"cannot get an access token: {why(exc)}") from None
        await self.adopt(result, result.tokens.requested_scope)
