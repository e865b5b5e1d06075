"""The failures a transport reports, and how they leave its nursery.

A transport raises ``protocol.jsonrpc.messages.RPCError`` when the server answered with an
error (the server is alive), and a ``TransportError`` when the server could not be
reached or stopped answering: the second kind is what circuit breakers count. A
reply that is too large or cannot be read fails only the request it answered
(``protocol.jsonrpc.reply_faults``): the server sent it, so it is up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final

import trio
from msgspec import UNSET

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply, MessageTooLarge


class TransportError(Exception):
    """An availability failure. ``reason`` is one line a person (or a model) can read."""

    def __init__(self, reason: str, *, detail: str = "", retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail
        self.retry_after = retry_after

    def describe(self) -> str:
        return f"{self.reason}\n{self.detail}" if self.detail else self.reason


class RequestUnanswered(TransportError):
    """A request was sent whole and no answer came in time: the server may have acted
    on it."""


class SpawnError(TransportError):
    """The server's command could not be started at all."""


class Unreachable(TransportError):
    """No connection could be made at all (refused, no route, no such host, timed out)."""


class TransportClosed(TransportError):
    """The process exited, its stdout closed, or the connection went away."""


class StreamCut(TransportError):
    """A response stream ended before the response it was carrying."""


class HTTPStatusError(TransportError):
    def __init__(
        self,
        reason: str,
        *,
        status: int,
        detail: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(reason, detail=detail, retry_after=retry_after)
        self.status = status


class AuthError(HTTPStatusError):
    """401/403: the server refused our credentials; ``challenge`` is WWW-Authenticate,
    ``peer`` the address the refusal came from (None: not known)."""

    def __init__(
        self, reason: str, *, status: int, challenge: str = "", peer: str | None = None
    ) -> None:
        super().__init__(reason, status=status)
        self.challenge = challenge
        self.peer = peer


class SessionExpired(TransportError):
    """Legacy HTTP: the server no longer knows our Mcp-Session-Id."""


class UnexpectedReply(TransportError):
    """The server answered with something that is not MCP (an HTML page, an empty 4xx)."""

    def __init__(self, reason: str, *, status: int = 0, body: bytes = b"") -> None:
        super().__init__(reason)
        self.status = status
        self.body = body


class InvalidResponse(UnexpectedReply):
    """A message that is plainly a response but cannot be taken (both a result and an
    error, an id that is no id, a batch of responses, an ``"id"`` given twice):
    ``given`` are the ids the server wrote (one, or each the batch's responses or the
    response gives), ``why`` what is wrong with it, for failing each request it
    answered (``protocol.jsonrpc.refused_replies``)."""

    def __init__(
        self,
        reason: str,
        *,
        given: tuple[object, ...],
        why: str,
        status: int = 0,
        body: bytes = b"",
    ) -> None:
        super().__init__(reason, status=status, body=body)
        self.given = given
        self.why = why


class BodyTooLarge(UnexpectedReply):
    """An HTTP body over the reader's limit (left unread)."""

    def __init__(self, reason: str, *, status: int, size: int | None, limit: int) -> None:
        super().__init__(reason, status=status)
        self.size = size
        self.limit = limit


class HttpRPCError(rpc.RPCError):
    """A JSON-RPC error that arrived in an HTTP reply; ``http_status`` says which."""

    def __init__(self, code: int, message: str, data: object = UNSET, *, http_status: int) -> None:
        super().__init__(code, message, data)
        self.http_status = http_status

    @classmethod
    def received(cls, error: rpc.ErrorObject, status: int) -> HttpRPCError:
        return cls(error.code, error.message, error.data, http_status=status)

    def replaced(self, message: str, data: object) -> HttpRPCError:
        return HttpRPCError(self.code, message, data, http_status=self.http_status)


class ServerCancelled(Exception):
    """The server itself cancelled one of our requests (how it may end a subscription)."""


# What a transport raises for a request its server replied to (with an error, its own
# cancel, a reply too large or unreadable), as against one it got no reply to.
SERVER_REPLIES: Final = (rpc.RPCError, ServerCancelled, MessageTooLarge, MalformedReply)


@contextlib.contextmanager
def single_exceptions() -> Iterator[None]:
    """Let an exception from a context manager's body leave it bare.

    Transports run helper tasks in a nursery around the caller's ``async with`` body;
    trio wraps whatever that body raises in an ExceptionGroup. The helper tasks never
    raise, so a group with one leaf is just the caller's own exception.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        leaves = list(_leaves(group))
        cancelled = [e for e in leaves if isinstance(e, trio.Cancelled)]
        if cancelled:
            # Being cancelled while the body failed too (a server dying during shutdown):
            # the cancellation is what the surrounding scope must see; the failure no
            # longer matters to anyone.
            raise cancelled[0] from None
        if len(leaves) == 1:
            raise leaves[0] from None
        raise


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc
