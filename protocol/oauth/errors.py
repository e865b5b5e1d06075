"""The errors the OAuth core raises.

As in h11, a mistake of the caller (feeding a response nobody asked for, asking
for the next step of a finished flow) is kept apart from a fault of the other
side (metadata that does not validate, a redirect with the wrong ``iss``). Every
message names what was being done and, where there is one, what the user can
change. No message ever carries a token, a secret, a code or a PKCE verifier.
"""

from __future__ import annotations


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
    code already used), so only a new interactive login helps; otherwise the
    request may succeed later or after a configuration change.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        error: str | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.description = description

    @property
    def needs_login(self) -> bool:
        return self.error == "invalid_grant"


class StepUpLimit(OAuthError):
    """A server keeps asking for more scope than new authorizations obtained."""
