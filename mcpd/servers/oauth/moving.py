"""A server that names another authorization server than the one its login is with:
everything of the old one is void there, down to the scopes a step-up asked of it."""

from __future__ import annotations

import logging

from protocol.oauth import BearerChallenge, DiscoveryResult, OAuthError, issuer_still_listed
from protocol.shown.logfields import log_extra
from transports.errors import TransportError

from .errors import why
from .state import AuthState

logger = logging.getLogger("mcpd.auth")


async def recheck_step_up(auth: AuthState) -> None:
    """Before a step-up's login (lock held): its scopes are named by the authorization
    server in use, and are not asked of another the server moved to meanwhile."""
    if auth.stepping_up() and auth.creds.issuer is not None:
        await moved_away(auth, auth.challenge)


async def moved_away(auth: AuthState, challenge: BearerChallenge | None) -> DiscoveryResult | None:
    """Re-read the resource metadata (lock held): the new discovery if the server now
    names another authorization server (everything bound to the old one is dropped)."""
    issuer = auth.creds.issuer
    if issuer is None:
        return None
    try:
        discovery = await auth.http.discover(
            auth.url,
            challenge,
            await auth.policy(),
            known_issuers=(issuer,),
            allow_legacy=auth.allow_legacy,
        )
    except (TransportError, OAuthError) as exc:
        logger.info(
            "%s: could not re-read the authorization metadata: %s",
            auth.alias,
            why(exc),
            extra=log_extra(auth.alias),
        )
        return None
    prm = discovery.resource_metadata
    if prm is None or issuer_still_listed(issuer, prm):
        return None
    auth.moved_to(discovery)
    await auth.save()
    logger.warning(
        "%s: the server moved from the authorization server %s to %s",
        auth.alias,
        issuer,
        discovery.issuer,
        extra=log_extra(auth.alias, "authorization_server_moved", discovery.issuer),
    )
    return discovery
