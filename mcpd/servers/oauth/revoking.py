"""Revoking a login's tokens (RFC 7009), for ``mcpd auth logout``: of a running
server's login (``login``) and of one saved for a server no longer configured
(``forget_unconfigured``), which is removed from disk whatever the revocation did."""

from __future__ import annotations

import logging
import os
from typing import Any, Literal

import trio

from protocol.logfields import log_extra
from protocol.oauth import (
    AuthorizationServer,
    ClientRegistration,
    FetchPolicy,
    OAuthError,
    Secret,
    SigningKey,
    TokenSet,
)
from transports.errors import TransportError
from transports.http.oauth_client import OAuthHttp

from ...local.oauth_store import OAuthStore, StoredLogin
from .errors import why
from .state import TOKEN_REQUEST_TIMEOUT

logger = logging.getLogger("mcpd.auth")

_Hint = Literal["refresh_token", "access_token"]


async def revoke(
    http: OAuthHttp,
    tokens: TokenSet,
    server: AuthorizationServer,
    reg: ClientRegistration,
    policy: FetchPolicy,
    key: SigningKey | None,
) -> tuple[list[str], str | None]:
    """The tokens revoked (the refresh token first: it outlives the other), and why
    revoking stopped short (None: it did not, or the server offers no revocation)."""
    revoked: list[str] = []
    hints: list[tuple[_Hint, Secret | None]] = [
        ("refresh_token", tokens.refresh_token),
        ("access_token", tokens.access_token),
    ]
    for hint, token in hints:
        if token is None:
            continue
        try:
            offered = await http.revoke(server, reg, token, hint, policy, key=key)
        except (TransportError, OAuthError) as exc:
            return revoked, why(exc)
        if not offered:
            break
        revoked.append(hint)
    return revoked, None


async def forget_unconfigured(alias: str, state_dir: str) -> dict[str, Any] | None:
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
    revoked: list[str] = []
    problem: str | None = None
    if not isinstance(found, StoredLogin):
        problem = f"the saved login cannot be read ({found.why})" if found else None
    elif current is not None and tokens is not None:
        server, reg = current.server, current.registration
        if server is not None and reg is not None:
            http = OAuthHttp(
                label=f"{alias}: authorization",
                server_url=found.server_url,
                timeout=TOKEN_REQUEST_TIMEOUT,
            )
            try:
                policy = await http.policy_for(found.server_url)
            except (TransportError, OAuthError) as exc:
                problem = why(exc)
            else:
                revoked, problem = await revoke(http, tokens, server, reg, policy, None)
    await trio.to_thread.run_sync(os.unlink, path)
    logger.info(
        "%s: the saved login of a server no longer configured was removed (%s)",
        alias,
        path,
        extra=log_extra(alias, "logged_out"),
    )
    return {
        "had_tokens": tokens is not None or problem is not None,
        "revoked": revoked,
        "problem": problem,
        "removed": path,
    }


def _listed(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []
