"""A person's login to one server, in two halves, and logging out.

mcpd runs without a terminal or a browser, so ``mcpd auth login`` does the part that
needs a person: it listens on a loopback port, shows (or opens) the authorization
URL and brings back the redirect. The daemon does the rest: ``begin`` runs
discovery and registration and returns the URL with the login's id; the PKCE
verifier never leaves it, the state only in that URL. ``finish`` checks the
redirect (``iss``, state) and exchanges the code. Anyone who can reach the loopback
port could have sent a redirect, and the state can be known to others (it is in the
URL the browser is sent to), so neither a redirect without the login's state nor one
whose code is not taken ends the login: it keeps waiting for the browser's own.
Only the latest login of a server is waiting at any time, for at most ``LOGIN_TTL``.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from typing import Final

import msgspec
import trio

from protocol.oauth import (
    CLIENT_REFUSED,
    AuthorizationDenied,
    AuthorizationFlow,
    Authorized,
    BearerChallenge,
    FetchPolicy,
    FlowConfig,
    FlowStep,
    NoAuthorizationMetadata,
    OAuthError,
    OpenBrowser,
    SendRequest,
    TokenEndpointError,
    carries_state,
)
from protocol.oauth.authorize import shown, shown_list
from protocol.shown.logfields import log_extra
from transports.errors import TransportError

from ...login_answers import LoggedOut, LoginStatus
from .auth import ServerAuth
from .credentials import Replaced
from .errors import AuthFailed, LoginError, NoOAuthLogin, RedirectFailed, why
from .moving import recheck_step_up
from .revoking import Revocation, left_valid, revoke_login

LOGIN_TTL: Final = 600.0
logger = logging.getLogger("mcpd.auth")


class _Pending(msgspec.Struct):
    id: str
    flow: AuthorizationFlow
    started: float


class Login:
    def __init__(self, auth: ServerAuth) -> None:
        self.auth = auth
        self._pending: _Pending | None = None
        self._finishing = trio.Lock()  # one redirect of a login is tried at a time

    @property
    def pending(self) -> bool:
        return self._pending is not None

    async def begin(self, redirect_uri: str | None) -> tuple[str, str] | None:
        """Start a login: (the URL to open, the login's id); None when it needed no
        browser (client credentials) and is done."""
        auth = self.auth
        async with auth.lock:
            await auth.load()
            if auth.kind == "client_credentials":
                try:
                    await auth.client_credentials(auth.challenge)
                except AuthFailed as exc:
                    raise LoginError(exc.reason) from None
                auth.logged_in()
                return None
            await recheck_step_up(auth)
        if redirect_uri is None:
            raise LoginError("a login needs a redirect URI to come back to")
        try:
            policy = await auth.policy()
            flow, action = await self._open(redirect_uri, policy)
        except NoAuthorizationMetadata as exc:
            auth.forget_wanted()
            raise no_oauth_login(auth.alias, exc) from None
        except (TransportError, OAuthError) as exc:
            auth.forget_wanted()
            raise LoginError(f"cannot start the login: {why(exc)}") from None
        except LoginError:
            auth.forget_wanted()
            raise
        assert isinstance(action, OpenBrowser)
        outgrown = flow.outgrown
        if outgrown is not None:
            logger.info(
                "%s: mcpd registers a new client with %s: the one it had there was "
                "registered for the redirect address %s, and a login there now comes back "
                "to %s",
                auth.alias,
                shown(outgrown.issuer),
                shown_list(outgrown.redirect_uris),
                shown(action.redirect_uri),
                extra=log_extra(auth.alias, "registered_again", outgrown.issuer),
            )
        shared = flow.shared_redirect
        if shared is not None and auth.first_told_of_shared_redirect(shared.issuer):
            logger.warning(
                "%s: the client mcpd registered with %s is for the redirect address %s, "
                "which logins at every authorization server share, and it registers no "
                "new clients; mcpd keeps that client, and logins there come back to the "
                "shared address, where an answer from another authorization server can "
                "arrive too (an OAuth mix-up: see the login section of docs/security.md)",
                auth.alias,
                shown(shared.issuer),
                shown_list(shared.redirect_uris),
                extra=log_extra(auth.alias, "shared_redirect", shared.issuer),
            )
        self._pending = _Pending(secrets.token_urlsafe(12), flow, auth.clock())
        return action.url, self._pending.id

    async def _open(
        self, redirect_uri: str, policy: FetchPolicy
    ) -> tuple[AuthorizationFlow, FlowStep]:
        """A browser login's flow, driven up to the URL to open."""
        auth = self.auth
        kept = auth.challenge
        flow = self._flow(redirect_uri, policy, kept)
        try:
            return flow, await self._drive(flow, policy)
        except (TransportError, OAuthError) as exc:
            if kept is None or kept.resource_metadata is None or flow.discovery is not None:
                raise
            failed = exc
        # The server's last 401 named resource metadata that could not be had. That
        # answer may be old (nothing asks the server again while it waits for a login),
        # so its metadata is looked for as if the 401 had named none.
        fresh = msgspec.structs.replace(kept, resource_metadata=None)
        flow = self._flow(redirect_uri, policy, fresh)
        try:
            action = await self._drive(flow, policy)
        except (TransportError, OAuthError) as exc:
            raise LoginError(
                f"cannot start the login: {why(failed)}; nor without the metadata its "
                f"last 401 named: {why(exc)}"
            ) from None
        if auth.challenge is kept:
            auth.challenge = fresh
        return flow, action

    def _flow(
        self, redirect_uri: str, policy: FetchPolicy, challenge: BearerChallenge | None
    ) -> AuthorizationFlow:
        auth = self.auth
        return AuthorizationFlow(
            FlowConfig(
                auth.url,
                client=auth.creds.client,
                redirect_uri=redirect_uri,
                allow_legacy=auth.allow_legacy,
            ),
            policy=policy,
            now=auth.clock(),
            challenge=challenge,
            scopes=auth.login_scopes(),
            registrations=auth.creds.registrations(),
        )

    async def finish(self, login_id: str, redirect: str) -> Revocation | None:
        """Complete the login ``login_id`` with the redirect the browser came back to;
        ``RedirectFailed`` when that redirect did not log in and the login waits on.
        What became of the tokens the login replaced (None: none were to be revoked)."""
        async with self._finishing:
            return await self._finish(login_id, redirect)

    async def _finish(self, login_id: str, redirect: str) -> Revocation | None:
        auth = self.auth
        pending = self._pending
        if (
            pending is None
            or not hmac.compare_digest(pending.id.encode(), login_id.encode())
            or auth.clock() - pending.started > LOGIN_TTL
        ):
            raise LoginError(
                "this login is no longer waiting (a newer one replaced it, it took more than "
                f"{LOGIN_TTL / 60:.0f} minutes, or mcpd restarted); "
                f"run `mcpd auth login {auth.alias}` again"
            )
        flow = pending.flow
        asked = flow.pending
        if asked is None or not carries_state(redirect, asked.state.reveal()):
            # Not this login's answer: someone else's, or a stale one. It must not cost
            # the person their login, so the login keeps waiting for its own.
            raise RedirectFailed(
                "that redirect does not carry this login's state, so it is not the answer "
                "to it; the login is still waiting for its own"
            )
        try:
            flow.receive_redirect(redirect, auth.clock())
            # The code is good once: a token request abandoned halfway wastes the login.
            with trio.CancelScope(shield=True):
                action = await self._drive(flow, await auth.policy())
        except (TransportError, OAuthError) as exc:
            said = exc.refused if isinstance(exc, TokenEndpointError) else why(exc)
            refusal = await self._client_refusal(flow, exc)
            if isinstance(exc, TokenEndpointError) and refusal is not None:
                # The token endpoint refuses the client whatever code it is sent.
                self._pending = None
                raise LoginError(f"{said}; {refusal}") from None
            flow.await_another_redirect()
            # Not "a new login is needed": this one goes on.
            advice = refusal or self._no_scope_advice(flow, exc)
            if advice is not None:
                said += f"; {advice}"
            raise RedirectFailed(f"that redirect did not log in: {said}") from None
        if self._pending is pending:  # not a newer login begun meanwhile
            self._pending = None
        assert isinstance(action, Authorized)
        requested = flow.pending.scopes if flow.pending is not None else None
        async with auth.lock:
            replaced, saved = await auth.adopt(action.result, requested)
        if replaced is None:
            return None
        # Nothing holds the replaced tokens from now on, so this is the one chance to
        # revoke them: the person giving up does not cut it short (each request to
        # the authorization server has its own time limit).
        with trio.CancelScope(shield=True):
            outcome = await self._revoke_replaced(replaced, saved=saved)
        return outcome

    async def _revoke_replaced(self, replaced: Replaced, *, saved: bool) -> Revocation:
        """Revoke the tokens a login replaced, as the client they were issued to, once
        the new ones are saved: until then the saved file holds only the old ones."""
        auth = self.auth
        if saved:
            outcome = await revoke_login(
                auth.http,
                replaced.tokens,
                replaced.server,
                replaced.client,
                auth.policy,
                auth.creds.client.signing_key,
            )
        else:
            unsaved = "the new login could not be saved, so the saved file still holds them"
            outcome = left_valid(replaced.tokens, unsaved)
        if outcome.problem is not None:
            logger.warning(
                "%s: the tokens the new login replaced were not all revoked: %s",
                auth.alias,
                outcome.problem,
                extra=log_extra(auth.alias, "replaced_unrevoked", outcome.problem),
            )
        return outcome

    async def _client_refusal(self, flow: AuthorizationFlow, exc: Exception) -> str | None:
        """What to do when the authorization server refused the client itself (None:
        it refused something else). A client mcpd registered that the token endpoint
        refuses is forgotten, so that the next login registers a new one; a configured
        one is named for the person."""
        if not isinstance(exc, TokenEndpointError | AuthorizationDenied):
            return None
        reg, issuer = flow.registration, flow.pending.issuer if flow.pending else None
        if exc.error not in CLIENT_REFUSED or reg is None:
            return None
        auth = self.auth
        if reg.source != "dynamic":
            return (
                f"the authorization server refuses the client id {shown(reg.client_id)}; "
                f"check the client_id in [servers.{auth.alias}.auth] of mcpd's configuration"
            )
        if isinstance(exc, AuthorizationDenied):
            # Anyone who has the state can send such a redirect, and an authorization
            # server shows its own page rather than redirect for a client it does not
            # know (RFC 6749, 4.1.2.1): it decides nothing stored.
            return None
        async with auth.lock:
            if auth.creds.forget_registered_client(issuer) is not None:
                await auth.save()
        return (
            "the authorization server does not accept the client mcpd registered with it, "
            f"so mcpd forgot that client: run `mcpd auth login {auth.alias}` again to "
            "register a new one"
        )

    def _no_scope_advice(self, flow: AuthorizationFlow, exc: Exception) -> str | None:
        """For a bare ``access_denied`` to a request that named no scope (neither the
        server's 401 nor its resource metadata named any): some authorization servers
        grant nothing then, and only the configuration can name what to ask for."""
        if not isinstance(exc, AuthorizationDenied) or exc.error != "access_denied":
            return None
        if exc.description or flow.pending is None or flow.pending.scopes:
            return None
        return (
            "mcpd asked for no scope, since the server named none; if the authorization "
            "server grants nothing to such a login, name the scopes to ask for in `scopes` "
            f"under [servers.{self.auth.alias}.auth] (see docs/configuration.md)"
        )

    async def logout(self, *, forget_client: bool = False) -> LoggedOut:
        """Forget the tokens, revoking them first where the server offers it, as the
        client they were issued to (which logins may no longer use); with
        ``forget_client``, the clients mcpd registered too, so that the next login
        registers anew (kept otherwise: each registration is one more client there)."""
        auth = self.auth
        self._pending = None
        async with auth.lock:
            await auth.load()
            auth.forget_step_up()
            creds = auth.creds
            if not creds.has_tokens_saved():
                # No tokens to forget: a server that never needed a login keeps working (going on
                # would put it in needs_login, which no login could then end). A client mcpd
                # registered is forgotten all the same when asked, for a server that no
                # longer knows it.
                forgot = creds.forget_registered_clients() if forget_client else []
                if forgot:
                    await auth.save()
                return Revocation().logged_out(auth.alias, False, forgot_client=bool(forgot))
            tokens, outcome = creds.tokens, Revocation()
            if tokens is not None:
                outcome = await revoke_login(
                    auth.http,
                    tokens,
                    creds.server,
                    creds.tokens_client(),
                    auth.policy,
                    creds.client.signing_key,
                )
            creds.drop_all_tokens()
            forgot = creds.forget_registered_clients() if forget_client else []
            await auth.save()
            if auth.kind != "client_credentials":
                auth.lost("logged out")
        return outcome.logged_out(auth.alias, True, forgot_client=bool(forgot))

    def renewable(self) -> bool:
        """Whether mcpd can renew the login it holds without the person: a refresh
        token with the client it was issued to, or a machine identity (True too when it
        holds none)."""
        creds = self.auth.creds
        tokens = creds.tokens
        return (
            tokens is None
            or (tokens.refresh_token is not None and creds.tokens_client() is not None)
            or self.auth.kind == "client_credentials"
        )

    def status(self) -> LoginStatus:
        """The login as ``mcpd auth status`` and the server's row show it."""
        status = self.auth.status()
        status.login_pending = self.pending
        return status

    async def _drive(self, flow: AuthorizationFlow, policy: FetchPolicy) -> FlowStep:
        """Execute the flow's requests up to its next step that is not a request."""
        action = flow.next_action()
        while isinstance(action, SendRequest):
            response = await self.auth.http.execute(action.request, policy)
            flow.receive_response(response, self.auth.clock())
            action = flow.next_action()
        return action


def no_oauth_login(alias: str, exc: NoAuthorizationMetadata) -> NoOAuthLogin:
    said = f" ({exc.detail})" if exc.detail else ""
    return NoOAuthLogin(
        f"{alias} offers no OAuth authorization metadata at {exc.where}: it does not "
        f"support OAuth login; give it a token in `headers` ([servers.{alias}.headers] "
        f"in mcpd's configuration){said}"
    )
