"""Credentials that change while a transport lives: the hook it asks for them.

An OAuth access token expires, is refreshed, is replaced after a new login; the
transport does not know any of that. Before each message it asks its ``AuthHook``
for the ``Authorization`` value, tells it when the server refused that value (a
401/403 ``AuthError`` with the challenge) and when a message went through.
"""

from __future__ import annotations

from typing import Protocol

from protocol.http import check_header

from ..errors import AuthError, TransportError


class AuthHook(Protocol):
    """Where a transport gets its ``Authorization`` header value (``None``: none)."""

    async def authorization(self) -> str | None:
        """The value for the next message; may wait for a refresh under way."""
        ...

    async def refused(self, error: AuthError, sent: str | None) -> str | None:
        """The server refused ``sent``: a value to send the message again with, or
        ``None`` to let ``error`` stand (the hook may raise its own error instead)."""
        ...

    def accepted(self, sent: str | None) -> None:
        """A message carrying ``sent`` went through."""
        ...


def authorized(headers: list[tuple[bytes, bytes]], value: str | None) -> list[tuple[bytes, bytes]]:
    if value is None:
        return headers
    try:
        check_header("Authorization", value)
    except ValueError:
        raise TransportError("the access token cannot be sent in an HTTP header") from None
    kept = [(k, v) for k, v in headers if k.lower() != b"authorization"]
    return [*kept, (b"Authorization", value.encode("latin-1"))]
