"""Which scopes to ask for, first and after an ``insufficient_scope`` refusal.

First authorization (MCP "Scope Selection Strategy"): the ``scope`` of the 401
challenge if there is one, else every scope in the resource metadata's
``scopes_supported``, else no ``scope`` parameter at all. A 403's scope is added
to the metadata's instead: it names only what one request lacked.

``offline_access`` (for a refresh token) is added only when the authorization
server lists it in its own ``scopes_supported``, and only to a request that names
scopes anyway: asking for nothing but ``offline_access`` would change what a
server grants by default. It is removed when the server's list lacks it. A request
that asks for it also asks for ``prompt=consent``: OpenID Connect Core §11 has a
provider ignore ``offline_access`` without it, and issue no refresh token.

Step-up (403 with ``error="insufficient_scope"``): the new request is the union of
what was asked for before and what the challenge names, so permissions for other
operations are not lost. A server that keeps refusing gets a bounded number of
new authorizations, counted until a request succeeds again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

import msgspec

from .authorize import shown
from .challenge import BearerChallenge
from .errors import OAuthProtocolError, StepUpLimit
from .metadata import AuthorizationServer, ResourceMetadata

OFFLINE_ACCESS: Final = "offline_access"
DEFAULT_STEP_UP_LIMIT: Final = 2


# RFC 6749 §3.3: a scope token is printable ASCII without a space, ``"`` or ``\\``.
_SCOPE_TOKEN: Final = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")


def check_scopes(scopes: tuple[str, ...] | None, source: str) -> None:
    """Refuse a scope that is no scope token, before it reaches an authorization URL:
    a space would split it into scopes nobody named, and a control or bidi character
    would make the address shown to the person read otherwise than it is."""
    for scope in scopes or ():
        if not _SCOPE_TOKEN.fullmatch(scope):
            raise OAuthProtocolError(
                f"the scope {shown(scope)} from {source} is not a scope mcpd can ask for: "
                "a scope is printable ASCII without spaces, quotes or backslashes "
                "(RFC 6749 §3.3)"
            )


def _unique(scopes: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(s for s in scopes if s))


def initial_scopes(
    challenge: BearerChallenge | None, prm: ResourceMetadata | None
) -> tuple[str, ...] | None:
    listed = _unique(prm.scopes_supported) if prm is not None and prm.scopes_supported else ()
    if challenge is not None and challenge.scope:
        if challenge.insufficient_scope:
            # A 403 names what the request lacked, not all a login needs.
            return _unique((*listed, *challenge.scope))
        return challenge.scope
    return listed or None


def adjust_offline_access(
    scopes: tuple[str, ...] | None, server: AuthorizationServer, *, want_refresh: bool = True
) -> tuple[str, ...] | None:
    if scopes is None:
        return None
    listed = server.metadata.scopes_supported
    if listed is not None and OFFLINE_ACCESS not in listed:
        scopes = tuple(s for s in scopes if s != OFFLINE_ACCESS)
    elif want_refresh and server.offers_offline_access and OFFLINE_ACCESS not in scopes:
        scopes = (*scopes, OFFLINE_ACCESS)
    return scopes or None


def scope_param(scopes: tuple[str, ...] | None) -> str | None:
    return " ".join(scopes) if scopes else None


def prompt_param(scopes: tuple[str, ...] | None) -> str | None:
    """The ``prompt`` an authorization request for ``scopes`` carries (None: none)."""
    return "consent" if OFFLINE_ACCESS in (scopes or ()) else None


class ScopeState(msgspec.Struct, frozen=True):
    """Per server: what the latest authorization asked for, and how many step-ups
    have happened since a request last succeeded."""

    requested: tuple[str, ...] = ()
    step_ups: int = 0

    def authorized(self, scopes: tuple[str, ...] | None) -> ScopeState:
        """Record a finished authorization that asked for ``scopes``."""
        return ScopeState(scopes or (), self.step_ups)

    def succeeded(self) -> ScopeState:
        """A request went through with the current token: the step-up count restarts."""
        return self if self.step_ups == 0 else ScopeState(self.requested, 0)

    def step_up(
        self, challenge: BearerChallenge, *, limit: int = DEFAULT_STEP_UP_LIMIT
    ) -> tuple[ScopeState, tuple[str, ...]]:
        """The scopes for a new authorization after ``challenge`` refused a request,
        with the state to keep meanwhile; ``StepUpLimit`` once ``limit`` step-ups
        in a row have not helped."""
        if self.step_ups >= limit:
            wanted = " ".join(challenge.scope or ()) or "more scope"
            raise StepUpLimit(
                f"the server still refuses the request for insufficient scope after "
                f"{self.step_ups} new authorization(s) (it asks for {wanted}); "
                "giving up until the next login"
            )
        scopes = _unique((*self.requested, *(challenge.scope or ())))
        return ScopeState(scopes, self.step_ups + 1), scopes
