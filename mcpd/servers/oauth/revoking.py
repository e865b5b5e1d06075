"""Revoking a login's tokens (RFC 7009), for ``mcpd auth logout``: of a running
server's login (``login``) and of one saved for a server no longer configured
(``forget_unconfigured``), which is removed from disk whatever the revocation did."""

from __future__ import annotations

import logging
import os
from typing import Any, Literal

import msgspec
import trio

from protocol.logfields import log_extra
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
from transports.errors import TransportError
from transports.http.oauth_client import OAuthHttp

from ...local.oauth_store import OAuthStore, StoredLogin
from .errors import why
from .state import TOKEN_REQUEST_TIMEOUT

logger = logging.getLogger("mcpd.auth")

_Hint = Literal["refresh_token", "access_token"]


class Revocation(msgspec.Struct):
    """What a logout's revocation did: the tokens revoked, those of a kind the server
    does not revoke (RFC 7009 §2.2.1 ``unsupported_token_type``: not a failure, the
    token ends with its lifetime), and why revoking stopped short (None: it did not,
    or the server offers no revocation)."""

    revoked: list[_Hint] = msgspec.field(default_factory=list)
    not_revocable: list[_Hint] = msgspec.field(default_factory=list)
    problem: str | None = None

    def said(self) -> dict[str, Any]:
        return {
            "revoked": list(self.revoked),
            "not_revocable": list(self.not_revocable),
            "problem": self.problem,
        }


async def revoke(
    http: OAuthHttp,
    tokens: TokenSet,
    server: AuthorizationServer,
    reg: ClientRegistration,
    policy: FetchPolicy,
    key: SigningKey | None,
) -> Revocation:
    """Revoke the tokens, the refresh token first: it outlives the other."""
    out = Revocation()
    hints: list[tuple[_Hint, Secret | None]] = [
        ("refresh_token", tokens.refresh_token),
        ("access_token", tokens.access_token),
    ]
    for hint, token in hints:
        if token is None:
            continue
        try:
            offered = await http.revoke(server, reg, token, hint, policy, key=key)
        except TokenEndpointError as exc:
            if exc.error == "unsupported_token_type":
                out.not_revocable.append(hint)
                continue
            out.problem = why(exc)
            return out
        except (TransportError, OAuthError) as exc:
            out.problem = why(exc)
            return out
        if not offered:
            break
        out.revoked.append(hint)
    return out


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
    outcome = Revocation()
    if not isinstance(found, StoredLogin):
        outcome.problem = f"the saved login cannot be read ({found.why})" if found else None
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
                outcome.problem = why(exc)
            else:
                outcome = await revoke(http, tokens, server, reg, policy, None)
    await trio.to_thread.run_sync(os.unlink, path)
    logger.info(
        "%s: the saved login of a server no longer configured was removed (%s)",
        alias,
        path,
        extra=log_extra(alias, "logged_out"),
    )
    return {
        "had_tokens": tokens is not None or outcome.problem is not None,
        **outcome.said(),
        "removed": path,
    }


def _listed(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []
