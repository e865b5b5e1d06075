"""Revoking a login's tokens (RFC 7009), for ``mcpd auth logout``: of a running
server's login (``login``) and of one saved for a server no longer configured
(``forget_unconfigured_in``), which is removed from disk whatever the revocation did;
and for ``mcpd auth login``, of the tokens a new login replaced when they were issued
to another client or by another issuer."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Literal

import msgspec
import trio
from msgspec import UNSET, UnsetType

from protocol.oauth import (
    AuthorizationServer,
    ClientRegistration,
    FetchPolicy,
    OAuthError,
    Secret,
    SigningKey,
    TokenEndpointError,
    TokenSet,
)
from protocol.shown.logfields import log_extra
from transports.errors import TransportError
from transports.http.oauth_client import OAuthHttp

from ...local.state.oauth_store import OAuthStore, StoredLogin
from ...login_answers import LoggedOut, TokensReplaced
from .errors import why
from .state import TOKEN_REQUEST_TIMEOUT

logger = logging.getLogger("mcpd.auth")

_Hint = Literal["refresh_token", "access_token"]


class Revocation(msgspec.Struct):
    """What a revocation did: the tokens revoked, those of a kind the server
    does not revoke (RFC 7009 §2.2.1 ``unsupported_token_type``: not a failure, the
    token ends with its lifetime), why revoking stopped short or could not be tried
    (None: it did not, or the server offers no revocation) and the tokens that are
    left valid at the authorization server for that reason."""

    revoked: list[_Hint] = msgspec.field(default_factory=list)
    not_revocable: list[_Hint] = msgspec.field(default_factory=list)
    problem: str | None = None
    unrevoked: list[_Hint] = msgspec.field(default_factory=list)

    def stopped(self, problem: str, left: list[tuple[_Hint, Secret]]) -> Revocation:
        self.problem = problem
        self.unrevoked = [hint for hint, _ in left]
        return self

    def said(self) -> TokensReplaced:
        return TokensReplaced(
            revoked=list(self.revoked),
            not_revocable=list(self.not_revocable),
            problem=self.problem,
            unrevoked=list(self.unrevoked),
        )

    def logged_out(
        self,
        server: str,
        had_tokens: bool,
        *,
        forgot_client: bool | UnsetType = UNSET,
        removed: str | UnsetType = UNSET,
    ) -> LoggedOut:
        """A logout of ``server`` that did this revocation."""
        return LoggedOut(
            server=server,
            had_tokens=had_tokens,
            revoked=list(self.revoked),
            not_revocable=list(self.not_revocable),
            problem=self.problem,
            unrevoked=list(self.unrevoked),
            forgot_client=forgot_client,
            removed=removed,
        )


def _held(tokens: TokenSet) -> list[tuple[_Hint, Secret]]:
    """The tokens to revoke, the refresh token first: it outlives the other."""
    hints: list[tuple[_Hint, Secret | None]] = [
        ("refresh_token", tokens.refresh_token),
        ("access_token", tokens.access_token),
    ]
    return [(hint, token) for hint, token in hints if token is not None]


async def revoke_login(
    http: OAuthHttp,
    tokens: TokenSet,
    server: AuthorizationServer | None,
    reg: ClientRegistration | None,
    policy: Callable[[], Awaitable[FetchPolicy]],
    key: SigningKey | None,
) -> Revocation:
    """The revocation of the tokens at ``server`` as ``reg``, the client they were
    issued to; when either is missing, nothing can be asked, and it says so."""
    if server is None:
        problem = "mcpd does not have their authorization server's metadata to ask it"
    elif reg is None:
        problem = "mcpd no longer has the client they were issued to, which revoking them needs"
    else:
        try:
            allowed = await policy()
        except (TransportError, OAuthError) as exc:
            problem = why(exc)
        else:
            return await revoke(http, tokens, server, reg, allowed, key)
    return left_valid(tokens, problem)


def left_valid(tokens: TokenSet, problem: str) -> Revocation:
    """None of the tokens revoked, for ``problem``."""
    return Revocation().stopped(problem, _held(tokens))


async def revoke(
    http: OAuthHttp,
    tokens: TokenSet,
    server: AuthorizationServer,
    reg: ClientRegistration,
    policy: FetchPolicy,
    key: SigningKey | None,
) -> Revocation:
    """Revoke the tokens, the refresh token first, as the client they were issued to."""
    out = Revocation()
    held = _held(tokens)
    for at, (hint, token) in enumerate(held):
        try:
            offered = await http.revoke(server, reg, token, hint, policy, key=key)
        except TokenEndpointError as exc:
            if exc.error == "unsupported_token_type":
                out.not_revocable.append(hint)
                continue
            return out.stopped(why(exc), held[at:])
        except (TransportError, OAuthError) as exc:
            return out.stopped(why(exc), held[at:])
        if not offered:
            break
        out.revoked.append(hint)
    return out


async def forget_unconfigured_in(alias: str, state_dir: str) -> LoggedOut | None:
    """Log out of the login saved for ``alias``, a server the configuration no longer
    names: its tokens are revoked where the saved file says how (its authorization
    server's revocation endpoint, its client id), and the file is removed. None: no
    login is saved under that name."""
    store = OAuthStore(state_dir)
    # Only a name the folder lists: ``alias`` comes from the command line.
    listed = await trio.to_thread.run_sync(_listed, store.directory)
    if f"{alias}.json" not in listed:
        return None
    path = store.path(alias)
    found = await store.read(alias)
    current = found.current if isinstance(found, StoredLogin) else None
    tokens = current.tokens if current is not None else None
    outcome = Revocation()
    if not isinstance(found, StoredLogin):
        outcome.problem = f"the saved login cannot be read ({found.why})" if found else None
    elif current is not None and tokens is not None:
        http = OAuthHttp(
            label=f"{alias}: authorization",
            server_url=found.server_url,
            timeout=TOKEN_REQUEST_TIMEOUT,
        )
        policy = functools.partial(http.policy_for, found.server_url)
        outcome = await revoke_login(http, tokens, current.server, current.issued_to, policy, None)
    await trio.to_thread.run_sync(os.unlink, path)
    logger.info(
        "%s: the saved login of a server no longer configured was removed (%s)",
        alias,
        path,
        extra=log_extra(alias, "logged_out"),
    )
    return outcome.logged_out(
        alias, tokens is not None or outcome.problem is not None, removed=path
    )


def _listed(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []
