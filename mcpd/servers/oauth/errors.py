"""What can go wrong with a server's authorization, kept apart from the OAuth client
that decides it: every runner, session and scheduler catches these, and a daemon
with only stdio servers must not load ``protocol.oauth`` and the OAuth transport to
be able to name them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.shown.visible import quote
from transports.errors import TransportError

if TYPE_CHECKING:
    from protocol.oauth import BearerChallenge


class LoginRequired(TransportError):
    """Only a person can help (``mcpd auth login ALIAS``). Not a failure of the server:
    it is not retried with backoff and not counted by the circuit breaker."""


class AuthFailed(TransportError):
    """A token could not be obtained or renewed; the reason says why."""


class LoginError(Exception):
    """A login could not start or finish; the message is for the person running it."""


class RedirectFailed(LoginError):
    """A redirect with the login's state did not log in: the login still waits for
    another, since that one need not have been the browser's."""


class NoOAuthLogin(LoginError):
    """The server does not support an OAuth login at all; the message names it."""


def why(exc: Exception) -> str:
    return exc.reason if isinstance(exc, TransportError) else str(exc)


def scope_words(challenge: BearerChallenge, otherwise: str) -> str:
    """The scope a challenge asks for, quoted as the server's words, or mcpd's own."""
    return quote(" ".join(challenge.scope)) if challenge.scope else otherwise
