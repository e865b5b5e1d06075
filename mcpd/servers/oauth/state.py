"""What mcpd holds for one HTTP server's authorization, and what it shows of it.

``AuthState`` is the part that the transport's hook (``ServerAuth``, in ``auth``)
and a person's login (``Login``, in ``login``) share: the credentials and the file
they are saved in, the lock that lets one renewal or login run at a time,
``needs_login`` and the event that wakes whoever waits for a login, the scopes
asked for, the fetch policy and HTTP client for the authorization server, and the
status ``mcpd auth status`` shows. It is apart from ``auth`` because it decides
nothing about when or how a token is renewed; that is the hook's.

Tokens leave it only as the header value that ``Credentials`` hands out.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Final

import trio

from protocol.oauth import (
    AuthorizationResult,
    BearerChallenge,
    ClientRegistration,
    DiscoveryResult,
    FetchPolicy,
    OAuthError,
    ScopeState,
    TokenEndpointError,
    check_scopes,
)
from protocol.oauth.ssrf import AddressClass, parse_address, standing
from protocol.shown.logfields import log_extra
from protocol.shown.server_urls import display_url
from protocol.shown.visible import quote
from transports.http.oauth_client import OAuthHttp

from ...config.tables.servertable import ServerConfig
from ...local.state.oauth_store import OAuthStore, Unusable
from ...login_answers import LoginStatus
from .credentials import Credentials, Replaced, client_config
from .errors import AuthFailed, LoginRequired, why

logger = logging.getLogger("mcpd.auth")

# A token request is not abandoned halfway when its caller gives up: a refresh token
# the server rotated but mcpd never saw would cost a login. This bounds it instead.
TOKEN_REQUEST_TIMEOUT: Final = 10.0
# A token without a refresh token is shown as expiring this long before it ends.
EXPIRING: Final = 600.0


class AuthState:
    def __init__(
        self,
        alias: str,
        cfg: ServerConfig,
        store: OAuthStore,
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
        # The 2025-03-26 stand-ins for a server without metadata (its origin as the
        # issuer, default endpoints) are only for servers that may be of that revision.
        self.allow_legacy = cfg.era != "modern"
        scopes = tuple(cfg.auth.scopes or ()) if cfg.auth is not None else ()
        self.creds = Credentials(cfg.url, client_config(cfg.auth), scopes)
        self._store = store
        self.clock = clock
        self.token_timeout = TOKEN_REQUEST_TIMEOUT
        self.http = http or OAuthHttp(
            label=f"{alias}: authorization",
            server_url=cfg.url,
            server_tls=_tls(cfg),
            connect_timeout=cfg.connect_timeout,
            timeout=self.token_timeout,
            clock=lambda: self.clock(),  # token expiry and mcpd's own checks agree
        )
        self._loaded = False
        # Why the login saved on disk is not used (None: there is none, or it is).
        self.set_aside: str | None = None
        self.lock = trio.Lock()
        # One address of each kind the server has sent a refusal from: with what its
        # name resolves to, they bound what its metadata may have mcpd fetch.
        self._refused_from: dict[AddressClass, str] = {}
        self.challenge: BearerChallenge | None = None
        self._scopes = ScopeState()
        self._wanted: tuple[str, ...] | None = None  # the union a step-up asks for
        self._told_shared: set[str] = set()  # issuers whose shared redirect was logged
        self._retry_early_at = 0.0
        # Why the refresh token was dropped while the access token lives on (None: it
        # was not): what the login asked for at its expiry says.
        self._refresh_lost: str | None = None
        # Grows by one as each renewal starts and as it ends: odd while one runs. Who
        # waited through a renewal can tell (``ServerAuth``), and so can a probe that
        # waited for a token rather than for the server (``health``).
        self.token_work = 0
        # Why the last renewal failed (None: it did not), shared with its waiters.
        self.failed: str | None = None
        self._changed = trio.Event()
        # Why a person has to log in, with the command to do it; None while not.
        self.needs_login: str | None = None
        # How ``needs_login`` is kept: it may quote what a server sent (the scope or
        # realm of a challenge), in which its owner masks every secret mcpd holds.
        self.kept_reason: Callable[[str], str] = str
        self.on_change: Callable[[], None] = lambda: None
        # The tokens changed (each change is saved): their owner's secrets are others.
        self.on_tokens: Callable[[], None] = lambda: None

    async def wait_changed(self) -> None:
        """Until a login finished (or a logout)."""
        await self._changed.wait()

    # -- what people see --

    def status(self) -> LoginStatus:
        now = self.clock()
        creds = self.creds
        setting = self.settings.redirect_port if self.settings else 0
        status = LoginStatus(
            server=self.alias,
            type=self.kind if self.enabled else "header",
            url=display_url(self.url),
            issuer=creds.issuer,
            client_id=creds.client_id(),
            logged_in=creds.tokens is not None,
            needs_login=self.needs_login,
            redirect_port=creds.redirect_port(setting),
            state=self._state(now),
        )
        return creds.shown(status, now)

    def _state(self, now: float) -> str:
        tokens = self.creds.tokens
        if self.needs_login is not None:
            return "needs_login"
        if tokens is None:
            # No auth table and never asked for one: nothing to log in to (so far).
            needed = self.settings is not None or self.challenge is not None
            return "not_logged_in" if needed else "no_login"
        if tokens.refresh_token is None and self.kind != "client_credentials":
            if tokens.expired(now):
                return "expired"
            if tokens.expires_at is not None and tokens.expires_at - now < EXPIRING:
                return "expiring"
        return "logged_in"

    # -- keeping the login --

    async def load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        stored = await self._store.read(self.alias)
        if stored is None:
            return
        if isinstance(stored, Unusable):
            self.set_aside = f"the saved login in {stored.path} cannot be read ({stored.why})"
            return
        self.set_aside = self.creds.restore(stored)
        if self.set_aside is None:
            self.on_tokens()
            return
        logger.warning(
            "%s: %s; it is not used",
            self.alias,
            self.set_aside,
            extra=log_extra(self.alias, "saved_login_unused", self.set_aside),
        )

    def no_login(self) -> str:
        """Why the server has no login to use, for a person to read."""
        if self.set_aside is not None:
            return f"{self.set_aside}, so it is not used"
        return "the server asks for a login"

    async def adopt(
        self, result: AuthorizationResult, requested: tuple[str, ...] | None
    ) -> tuple[Replaced | None, bool]:
        """Use a finished authorization from now on: the tokens it replaced that are to
        be revoked (None: none), and whether it was saved (if not, the file still holds
        those)."""
        replaced = self.creds.adopt(result)
        self.set_aside = None
        self._refresh_lost = None
        self._scopes = self._scopes.authorized(requested)
        self._wanted = None
        saved = await self.save()
        if self.needs_login is not None or self.kind != "client_credentials":
            self.needs_login = None
            self._notify()
        return replaced, saved

    async def save(self) -> bool:
        """Save the login; False when it could not be, and is kept in memory only."""
        self.on_tokens()
        try:
            await self._store.save(self.alias, self.creds.record)
            return True
        except OSError as exc:
            logger.error(
                "%s: cannot save the login to %s: %s (it is kept in memory only)",
                self.alias,
                self._store.path(self.alias),
                exc.strerror or exc,
                extra=log_extra(self.alias, "token_file", str(exc.strerror or exc)),
            )
            return False

    def logged_in(self) -> None:
        """A person's ``mcpd auth login`` took: a server waiting to try again tries now,
        not when its backoff says (``adopt`` says so only when a login was needed)."""
        self._notify()

    @contextlib.contextmanager
    def renewing(self) -> Iterator[None]:
        """Around a renewal: ``token_work`` and ``failed`` follow it."""
        self.failed = None
        self.token_work += 1
        try:
            yield
        except AuthFailed as exc:
            self.failed = exc.reason
            raise
        finally:
            self.token_work += 1

    def failed_since(self, seen: int) -> AuthFailed | None:
        """The failure of a renewal that ended since ``seen`` (``token_work``), while
        its caller waited for the lock: the outcome is that caller's too, since asking
        again at once would most likely fail the same way, one more wait each."""
        if self.token_work != seen and self.failed is not None:
            return AuthFailed(self.failed)
        return None

    def lost(self, why: str) -> LoginRequired:
        return self._login_needed(f"{why}; run `mcpd auth login {self.alias}`")

    async def client_refused(
        self, reg: ClientRegistration, exc: TokenEndpointError
    ) -> LoginRequired | AuthFailed:
        """The authorization server refuses mcpd's client itself: a client mcpd
        registered there is forgotten with its tokens, and the login that registers
        a new one is asked for; a configured one is the person's to fix."""
        if reg.source != "dynamic":
            return AuthFailed(
                f"cannot refresh the access token: {exc.refused}; the authorization server "
                f"refuses the client id {quote(reg.client_id)} that mcpd's configuration names "
                f"(client_id in [servers.{self.alias}.auth]): check that it is still "
                "registered there, with that secret"
            )
        self.creds.forget_registered_client()
        self.creds.drop_tokens()
        await self.save()
        logger.warning(
            "%s: the authorization server refuses the client %s mcpd registered with it; "
            "that client and its tokens are forgotten, and the next login registers a new one",
            self.alias,
            quote(reg.client_id),
            extra=log_extra(self.alias, "client_refused", exc.error),
        )
        return self.lost(
            f"the authorization server no longer accepts the client mcpd registered with it: "
            f"{exc.refused}; mcpd forgot that client, and the next login registers a new one"
        )

    def unclear_refusal(self, challenge: BearerChallenge | None) -> LoginRequired:
        """A 401 that does not say the server does OAuth (no metadata named): it may
        as well want an API key, so both ways forward are named."""
        said = challenge.words() if challenge is not None else "no WWW-Authenticate"
        alias = self.alias
        return self._login_needed(
            f"the server answered HTTP 401 ({said}) and names no OAuth metadata; if it "
            f"takes an API key or a token, give it one in `headers` ([servers.{alias}.headers] "
            f"in mcpd's configuration); if it supports OAuth, run `mcpd auth login {alias}`"
        )

    def _login_needed(self, reason: str) -> LoginRequired:
        self.needs_login = self.kept_reason(reason)
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

    def refuse_bad_scope(self, challenge: BearerChallenge | None, status: int) -> None:
        """``AuthFailed`` for a 401 or 403 that names a scope no login could ask for.
        Checked as it arrives, before anything of it is kept: kept, it would fail
        every later login, long after the server stopped naming it."""
        if challenge is None or status not in (401, 403):
            return
        try:
            check_scopes(challenge.scope, f"the server's {status}")
        except OAuthError as exc:
            raise AuthFailed(why(exc)) from None

    def refuse_scope_beyond_configured(self, challenge: BearerChallenge) -> None:
        """``AuthFailed`` for a machine identity's step-up to a scope its configured
        ``scopes`` lack: with no person to consent, that list is all it may ask for."""
        configured = self.settings.scopes if self.settings is not None else None
        if self.kind != "client_credentials" or not configured:
            return
        beyond = [s for s in challenge.scope or () if s not in configured]
        if beyond:
            raise AuthFailed(
                f"the server asks for the scope {quote(' '.join(beyond))}, which the "
                f"configured scopes do not grant (servers.{self.alias}.auth.scopes); "
                "mcpd asks for no more than they name"
            )

    def first_told_of_shared_redirect(self, issuer: str) -> bool:
        """Whether the journal has yet to say that logins at ``issuer`` come back to
        the redirect address every authorization server shares (it says so once)."""
        told = issuer in self._told_shared
        self._told_shared.add(issuer)
        return not told

    def stepping_up(self) -> bool:
        """Whether the next login asks for what a step-up added."""
        return self._wanted is not None

    def forget_wanted(self) -> None:
        """What a step-up asked for is no longer asked for: the login it was for was
        logged out of, or could not start with it."""
        self._wanted = None

    def forget_step_up(self) -> None:
        """A logout: what the server's refusals for insufficient scope asked for is
        asked for no more, so the next login starts from the configured scopes or the
        metadata's; where the metadata is, as the server named it, is kept."""
        self._wanted = None
        kept = self.challenge
        if kept is not None and kept.insufficient_scope:
            self.challenge = BearerChallenge(resource_metadata=kept.resource_metadata)

    def moved_to(self, discovery: DiscoveryResult) -> None:
        """The server now names another authorization server: what was asked of the old
        one, a step-up's scopes and the refusal that named them included, is not asked
        of the new one, whose scope names may differ."""
        self.creds.moved(discovery)
        self.forget_step_up()
        self._scopes = ScopeState()

    def scopes_before_step_up(self) -> ScopeState:
        """What the scopes asked for so far are, for a step-up to add to: those of the
        saved login when this daemon has not logged in since it started."""
        tokens = self.creds.tokens
        if self._scopes.requested or tokens is None:
            return self._scopes
        return self._scopes.authorized(tokens.requested_scope or tokens.scope)

    def refused_from(self, address: str | None) -> None:
        """The server refused a message over a connection to ``address`` (None: not
        known), so that is where the challenge it sent came from."""
        ip = parse_address(address) if address is not None else None
        if ip is not None:
            self._refused_from.setdefault(standing(ip), str(ip))

    async def policy(self) -> FetchPolicy:
        """What the server's metadata may have mcpd fetch (``ssrf``): what every
        address its name resolves to now, and every one it refused from, allows."""
        return await self.http.policy_for(self.url, also=tuple(self._refused_from.values()))


def _tls(cfg: ServerConfig) -> ssl.SSLContext | None:
    """The TLS the server's configuration asks for on its own origin (None: the
    default); OAuth requests to any other origin are verified the default way."""
    if cfg.url is None or not cfg.url.lower().startswith("https:"):
        return None
    if cfg.tls_verify and cfg.ca_file is None:
        return None
    ctx = ssl.create_default_context(cafile=cfg.ca_file)
    if not cfg.tls_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx
