"""The errors the OAuth core raises.

As in h11, a mistake of the caller (feeding a response nobody asked for, asking
for the next step of a finished flow) is kept apart from a fault of the other
side (metadata that does not validate, a redirect with the wrong ``iss``). Every
message names what was being done and, where there is one, what the user can
change. No message ever carries a token, a secret, a code or a PKCE verifier.
"""

from __future__ import annotations

from typing import Final

from ..shown.visible import quote

# The RFC 6749 codes that refuse the client itself rather than what it asked for.
CLIENT_REFUSED: Final = ("invalid_client", "unauthorized_client")


class OAuthError(Exception):
    """Base of every error raised by ``protocol.oauth``."""


class OAuthUsageError(OAuthError):
    """The caller drove the core out of order (the LocalProtocolError of this package)."""


class OAuthConfigError(OAuthError):
    """The configuration cannot work: a bad URL, a key that cannot be read, no way
    to obtain a client id. Fixing the configuration is the way out."""


class OAuthProtocolError(OAuthError):
    """A server broke the rules: metadata that does not validate, a response that
    is not what the standard says, a redirect that fails the checks."""


class NoAuthorizationMetadata(OAuthError):
    """The server shows no sign of OAuth: none of the metadata URLs had a document,
    and (where the 2025-03-26 default endpoints had to be tried) the registration
    endpoint they imply did not answer as one. It most likely wants credentials of
    another kind (an API key in a header). ``looked_at`` has each metadata URL
    tried with the HTTP status it answered; ``detail`` says what the guessed
    endpoint answered, when one was tried."""

    def __init__(self, looked_at: tuple[tuple[str, int], ...], detail: str = "") -> None:
        self.looked_at = looked_at
        self.detail = detail
        said = f"; {detail}" if detail else ""
        super().__init__(f"no OAuth authorization metadata at {self.where}{said}")

    @property
    def where(self) -> str:
        """The URLs looked at, with what they answered."""
        statuses = {status for _, status in self.looked_at}
        if len(statuses) == 1:
            urls = ", ".join(quote(url) for url, _ in self.looked_at)
            return f"{urls} ({_answer(statuses.pop())})"
        return ", ".join(f"{quote(url)} ({_answer(status)})" for url, status in self.looked_at)


def _answer(status: int) -> str:
    note = ", a redirect, not followed" if 300 <= status < 400 else ""
    return f"HTTP {status}{note}"


class BlockedUrl(OAuthError):
    """A URL (or the addresses it resolves to) that must not be fetched."""


class AuthorizationDenied(OAuthError):
    """The authorization server answered the authorization request with an error
    (for instance the user declined). ``error`` is the RFC 6749 code."""

    def __init__(self, message: str, *, error: str, description: str | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.description = description


class TokenEndpointError(OAuthError):
    """The token (or revocation) endpoint refused a request.

    ``error`` is the RFC 6749 §5.2 code when the server sent one. ``needs_login``
    says that the grant itself is gone (an expired or revoked refresh token, a
    code already used), so only a new interactive login helps; ``client_refused``
    that the server does not accept the client at all (it never knew it, or has
    forgotten a registration); otherwise the request may succeed later or after a
    configuration change.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        error: str | None = None,
        description: str | None = None,
        refused: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.description = description
        # What was refused and how, without the advice on what to do about it.
        self.refused = refused or message

    @property
    def needs_login(self) -> bool:
        return self.error == "invalid_grant"

    @property
    def client_refused(self) -> bool:
        return self.error in CLIENT_REFUSED


class StepUpLimit(OAuthError):
    """A server keeps asking for more scope than new authorizations obtained."""
