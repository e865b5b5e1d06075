"""The one way out for every HTTP message of a transport, and the answers without a result.

Every message (a POST, the GETs of legacy streams, the DELETE that ends a session)
goes through ``Sender.post``: it adds the credentials an ``AuthHook`` hands out,
sends once more when a refusal brings new ones (``with_authorization``, which the
HTTP+SSE transport's stream and POSTs go through too), and follows 307/308 within the
origin. A 308 is remembered, so later messages go straight to the new target.
Reading the answer is the caller's ``read`` function; the ones for answers that
carry no JSON-RPC result (an accepted notification, an error status) live here
too, because the legacy housekeeping needs them as much as the transport does.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Final, NoReturn, TypeVar

import trio

from protocol.http.parts import ResponseHead, check_header

from ..base import AuthHook
from ..errors import AuthError, SessionExpired, TransportClosed, TransportError, UnexpectedReply
from .connection import HttpConnection
from .pool import ConnectionPool
from .reply import SNIPPET, status_error
from .request import OutgoingMessage, SessionId, redirect_target

T = TypeVar("T")

MAX_REDIRECTS: Final = 5
ERROR_BODY_LIMIT: Final = 64 * 1024

Read = Callable[[HttpConnection, ResponseHead, OutgoingMessage], Awaitable[T]]


class Sender:
    def __init__(
        self,
        alias: str,
        target: str,
        pool: ConnectionPool,
        session: SessionId,
        is_closed: Callable[[], bool],
    ) -> None:
        self.alias = alias
        self.target = target
        self.pool = pool
        self.auth: AuthHook | None = None
        self._session = session
        self._is_closed = is_closed

    async def post(
        self,
        method: bytes,
        body: bytes,
        headers: list[tuple[bytes, bytes]],
        ex: OutgoingMessage,
        read: Read[T],
        pool: ConnectionPool | None = None,
    ) -> T:
        # DELETE is how a closing transport ends its session, so it still goes out.
        if self._is_closed() and method != b"DELETE":
            raise TransportClosed(f"{self.alias}: transport closed")

        def send(value: str | None) -> Awaitable[T]:
            return self._send(method, body, authorized(headers, value), ex, read, pool)

        return await with_authorization(self.auth, send)

    async def _send(
        self,
        method: bytes,
        body: bytes,
        headers: list[tuple[bytes, bytes]],
        ex: OutgoingMessage,
        read: Read[T],
        pool: ConnectionPool | None,
    ) -> T:
        target = self.target
        pool = pool or self.pool
        for _ in range(MAX_REDIRECTS + 1):
            conn = await pool.acquire()
            try:
                # One scope for the exchange, whose deadline the connection's reads
                # move: the read timeout without a scope per read.
                with trio.CancelScope() as watch:
                    conn.watch = watch
                    ex.sent = True
                    await conn.send(method, target.encode(), headers, body)
                    head = await conn.receive_head()
                    if head.status not in (307, 308):
                        return await read(conn, head, ex)
                    target = redirect_target(self.alias, self.pool.origin, head, target)
                    if head.status == 308:
                        self.target = target
                    await conn.read_prefix(ERROR_BODY_LIMIT)
                if watch.cancelled_caught:
                    raise conn.quiet()
            finally:
                conn.watch = None
                await pool.release(conn)
        raise TransportError(f"{self.alias}: more than {MAX_REDIRECTS} redirects for {ex}")

    async def accepted(self, conn: HttpConnection, head: ResponseHead, ex: OutgoingMessage) -> None:
        """The reader for a message that expects no result (202, or any 2xx)."""
        if head.status >= 400:
            await self.fail(conn, head, ex)
        if not 200 <= head.status < 300:
            await self.unexpected(conn, head, f"HTTP {head.status} to {ex}")
        await conn.read_prefix(ERROR_BODY_LIMIT)

    async def fail(self, conn: HttpConnection, head: ResponseHead, ex: OutgoingMessage) -> NoReturn:
        body = await conn.read_prefix(ERROR_BODY_LIMIT)
        exc = status_error(
            self.alias,
            head,
            body,
            str(ex),
            had_session=ex.session is not None,
            now=time.time(),
            peer=conn.peer,
            sessionful=self._session.negotiated and ex.method != "initialize",
        )
        if isinstance(exc, SessionExpired):
            self._session.lose(ex.session)
        raise exc

    async def unexpected(self, conn: HttpConnection, head: ResponseHead, what: str) -> NoReturn:
        body = await conn.read_prefix(SNIPPET)
        raise UnexpectedReply(f"{self.alias}: unexpected {what}", status=head.status, body=body)


async def with_authorization(
    auth: AuthHook | None, send: Callable[[str | None], Awaitable[T]]
) -> T:
    """What ``send`` returns, given the ``Authorization`` value ``auth`` hands out (None:
    no hook, or nothing to send); a refusal the hook answers with a new value is sent
    again with it, once for each kind of refusal (a 401 may bring a token that a 403
    then finds short of a scope: each is answered once, so no loop), a refusal of a
    kind already answered is the hook's to explain, if it can, and the hook hears
    which value went through."""
    if auth is None:
        return await send(None)
    sent = await auth.authorization()
    answered: set[int] = set()
    while True:
        try:
            answer = await send(sent)
        except AuthError as exc:
            if exc.status in answered:
                await auth.refused_again(exc, sent)
                raise
            # A refused message was not handled, so sending it again cannot run it twice.
            fresh = await auth.refused(exc, sent)
            if fresh is None:
                raise
            answered.add(exc.status)
            sent = fresh
            continue
        auth.accepted(sent)
        return answer


def authorized(headers: list[tuple[bytes, bytes]], value: str | None) -> list[tuple[bytes, bytes]]:
    """``headers`` with ``value`` as their one Authorization header (None: as they are)."""
    if value is None:
        return headers
    try:
        check_header("Authorization", value)
    except ValueError:
        raise TransportError("the access token cannot be sent in an HTTP header") from None
    kept = [(k, v) for k, v in headers if k.lower() != b"authorization"]
    return [*kept, (b"Authorization", value.encode("latin-1"))]


async def status_only(conn: HttpConnection, head: ResponseHead, ex: OutgoingMessage) -> int:
    await conn.read_prefix(ERROR_BODY_LIMIT)
    return head.status
