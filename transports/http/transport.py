"""Streamable HTTP client transport: one POST per JSON-RPC message.

A request's answer is either one ``application/json`` message or a ``text/event-stream``
carrying notifications about that request and then its response. Error statuses are
mapped in ``reply``; connections, TLS and the keep-alive pool live in ``connection``;
credentials and redirects in ``send``. Whether a request is sent again is the caller's.

The transport serves both eras. It keeps a legacy ``Mcp-Session-Id`` when a server hands
one out (unless the caller has marked the server modern) and ends it with DELETE on
close. A cancelled request loses its connection, which is how 2026-07-28 cancels; when
the caller has marked the server legacy (``transport.era = "legacy"``) it also POSTs
``notifications/cancelled``, because for those servers a disconnect cancels nothing
(that and the rest of a legacy session's upkeep: ``legacy_session``).

Only legacy servers get (``legacy_streams``) the session's server-push stream (GET,
``listen``) on a connection of its own, and a call whose event stream ends before its
response, after an event id, resumed with GET and ``Last-Event-ID`` instead of failing.

Credentials that change (OAuth access tokens) come from an ``AuthHook``, asked for the
``Authorization`` value before each message and told of a 401/403 (``AuthError``, with
the challenge) and of a message that went through. A refusal it answers with a new value
sends the message once more: a server that refused the credentials has not handled it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Final

import trio
from msgspec import Raw

from protocol.http.mcp_headers import TRANSPORT_HEADERS
from protocol.http.parts import ResponseHead, header_list, parse_url
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.splice import SplicedCall

from ..base import AuthHook, NotificationHandler, Params, ReplySink, Transport
from ..best_effort import POST_TIMEOUT
from ..complaints import Complaints
from ..errors import HttpRPCError, StreamCut, TransportClosed
from ..read_pace import ReadPace
from ..sends import Sends
from .answer import AnswerReader
from .connection import HttpConnection, client_tls
from .inflight import InFlight
from .legacy_session import end_session, post_answer, post_cancel
from .legacy_streams import (
    PushReader,
    PushStream,
    ResumableCut,
    check_stream_reply,
    resume_call,
)
from .params import DEFAULT_HTTP_PARAMS, HttpParams
from .pool import ConnectionPool
from .request import OutgoingMessage, RequestHeaders, SessionId
from .send import Sender

__all__ = ["HttpTransport", "open_http_transport"]

_DELETE_TIMEOUT: Final = 2.0
# How soon the kernel starts probing a quiet push stream's connection.
_PUSH_KEEPALIVE: Final = 60.0
# How long the first call may wait for the push stream to be answered.
_PUSH_READY: Final = 5.0


class HttpTransport(Transport):
    def __init__(
        self,
        alias: str,
        url: str,
        params: HttpParams = DEFAULT_HTTP_PARAMS,
        *,
        on_notification: NotificationHandler | None = None,
        auth: AuthHook | None = None,
    ) -> None:
        super().__init__(alias)
        origin, target = parse_url(url)
        self._session = SessionId(alias)
        self._max_body = params.max_body
        self._on_notification = on_notification
        self._ids = rpc.IdAllocator()
        self._closed = False  # ``closed`` as every message checks it: a plain read
        self._head = RequestHeaders(origin.authority, params.headers)
        ssl_context = client_tls(origin.scheme, verify=params.tls_verify, ca_file=params.ca_file)
        self._pool = ConnectionPool(
            origin,
            alias,
            size=params.pool_size,
            ssl_context=ssl_context,
            connect_timeout=params.connect_timeout,
            read_timeout=params.read_timeout,
        )
        self._out = Sender(alias, target, self._pool, self._session, self._is_closed)
        self._out.auth = auth
        # The push stream's own connection: it takes no slot from calls, and it may
        # be quiet for hours, so no read timeout applies (the kernel probes it instead).
        self._push_pool = ConnectionPool(
            origin,
            alias,
            size=1,
            ssl_context=ssl_context,
            connect_timeout=params.connect_timeout,
            read_timeout=None,
            tcp_keepalive=_PUSH_KEEPALIVE,
        )
        self._listening: trio.CancelScope | None = None
        self._push_session: str | None = None
        self._inflight = InFlight(alias)
        # One budget for the warnings about what the server sends, on all its streams,
        # and one for reading them.
        self._complaints = Complaints()
        self._pace: ReadPace = ReadPace(alias, params.max_body, params.read_budget)
        # Requests sent without their sender waiting (calls): a worker per connection.
        self._sends = Sends(alias, self._call, workers=params.pool_size)

    @property
    def auth(self) -> AuthHook | None:
        return self._out.auth

    @auth.setter
    def auth(self, hook: AuthHook | None) -> None:
        self._out.auth = hook

    @property
    def session_id(self) -> str | None:
        return self._session.value

    @session_id.setter
    def session_id(self, value: str | None) -> None:
        self._session.value = value

    @property
    def url(self) -> str:
        return f"{self._pool.origin}{self._out.target}"

    @property
    def session_lost(self) -> bool:
        return self._session.lost

    def reset_session(self) -> None:
        """Forget the legacy session (and the version it spoke) before a new handshake."""
        self._session.reset(sessions=self.era != "modern")
        self._head.version = None

    async def request(
        self,
        method: str,
        params: Params | SplicedCall,
        *,
        headers: Mapping[str, str] | None = None,
        cancellable: bool = True,
    ) -> Raw:
        rid = self._ids.next()
        if isinstance(params, SplicedCall):
            body: bytes = params.body(rid)
        else:
            body = rpc.encode_request(rid, method, params)
        ex = OutgoingMessage(method, rid, self._session.for_message(method, headers))
        waiting = self._inflight.expect(rid)
        try:
            with waiting:
                try:
                    out_headers = self._head.request(headers, ex)
                    return await self._out.post(b"POST", body, out_headers, ex, self._answer)
                except ResumableCut as early:
                    return await self._resume(ex, early.cut)
            # Its answer came on another stream: kept from the push stream, or one that
            # failed it. The server is done with it, so it is not told of the cancel.
            answer = self._inflight.settled(rid)
            if isinstance(answer, rpc.ErrorResponse):
                raise HttpRPCError.received(answer.error, 200)
            return answer.result
        except trio.Cancelled:
            if cancellable and ex.sent and self.era == "legacy":
                extra = header_list(headers or {}, "request", TRANSPORT_HEADERS)
                with trio.move_on_after(POST_TIMEOUT, shield=True):
                    await post_cancel(self._out, self._head, self._session, rid, extra)
            raise
        finally:
            self._inflight.drop(rid)

    async def notify(
        self, method: str, params: Params, *, headers: Mapping[str, str] | None = None
    ) -> None:
        body = rpc.encode_notification(method, params)
        ex = OutgoingMessage(method, None, self._session.for_message(method, headers))
        extra = header_list(headers or {}, "request", TRANSPORT_HEADERS)
        await self._out.post(b"POST", body, self._head.post(extra, ex), ex, self._out.accepted)
        if method == "notifications/initialized":
            self._session.opened()

    def send(
        self,
        method: str,
        params: Params | SplicedCall,
        reply: ReplySink,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> rpc.Id:
        """``request`` in a worker of the transport's; with a server not known to be
        modern, in the caller's context (contextvars): a legacy server's request on its
        stream goes to the caller's."""
        return self._sends.send(method, params, reply, headers, self.era != "modern")

    def _call(
        self, method: str, params: Params | SplicedCall, headers: Mapping[str, str] | None
    ) -> Awaitable[Raw]:
        return self.request(method, params, headers=headers)

    def forget(self, rid: rpc.Id, reason: str) -> None:
        """Its connection dropped (and, legacy, the server told)."""
        self._sends.forget(rid)

    async def listen(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Hold a legacy session's server-push stream open until the transport closes.

        Notifications on it go to ``on_notification``; the server's requests are
        answered by POST (``ping``; anything else gets -32601). It returns at once
        for a server not marked legacy, and quietly when the server offers no such
        stream (405 or another 4xx). One listener per transport. Started (for
        ``nursery.start``) once the server answered the first GET, or refused it,
        or took too long: what it sends there is heard from before the first call.
        """
        if self.era != "legacy" or self._closed:
            task_status.started()
            return
        if self._listening is not None:
            raise RuntimeError(f"{self.alias}: the server-push stream is already held")
        answered = trio.Event()

        def reader() -> PushReader:
            r = PushReader(
                self.alias,
                self._max_body,
                self._on_notification,
                self._answer_server_request,
                self._inflight.keep,
                complain=self._complaints.admit,
                pace=self._pace,
                on_unusable=self._inflight.refuse,
            )
            r.on_open = answered.set
            return r

        async def hold() -> None:
            try:
                await stream.hold(answered.set)
            finally:
                answered.set()

        stream = PushStream(
            self.alias,
            self._open_push,
            reader,
            self._is_closed,
            self._new_session,
            self._complaints.admit,
        )
        with trio.CancelScope() as self._listening:
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(hold)
                    with trio.move_on_after(_PUSH_READY):
                        await answered.wait()
                    task_status.started()
            finally:
                self._listening = None

    async def aclose(self) -> None:
        """End a legacy session with DELETE (bounded, shielded), then drop all connections."""
        if self._closed:
            return
        self._closed = True
        self.error = TransportClosed(f"{self.alias}: transport closed")
        self.closed.set()
        if self._listening is not None:
            self._listening.cancel()
        try:
            if self.session_id is not None:
                with trio.move_on_after(_DELETE_TIMEOUT, shield=True):
                    await end_session(self._out, self._head, self._session)
        finally:
            with trio.CancelScope(shield=True):
                await self._pool.aclose()
                await self._push_pool.aclose()

    # -- reading --

    async def _answer(self, conn: HttpConnection, head: ResponseHead, ex: OutgoingMessage) -> Raw:
        if head.status >= 400:
            await self._out.fail(conn, head, ex)
        if not 200 <= head.status < 300 or head.status in (202, 204):
            await self._out.unexpected(conn, head, f"HTTP {head.status} to {ex}")
        self._session.capture(head, self.era, ex.method)
        return await self._read_answer(conn, head, ex)

    async def _read_answer(
        self, conn: HttpConnection, head: ResponseHead, ex: OutgoingMessage
    ) -> Raw:
        # Only legacy servers may send requests on a response stream.
        on_request = self._answer_server_request if self.era == "legacy" else None
        reader = AnswerReader(
            self.alias,
            str(ex),
            ex.id,
            self._max_body,
            self._on_notification,
            on_request,
            complain=self._complaints.admit,
            pace=self._pace,
            inflight=self._inflight,
        )
        try:
            answer = await reader.read(conn, head)
        except StreamCut as cut:
            ex.resume.update(reader.decoder)
            # 2026-07-28 has no resumption: there a cut stream's request is lost.
            if self.era == "legacy" and ex.resume.event_id is not None:
                raise ResumableCut(cut) from None
            raise
        if isinstance(answer, rpc.ErrorResponse):
            raise HttpRPCError.received(answer.error, head.status)
        return answer.result

    # -- legacy streams: resuming a call's stream, the server-push stream --

    async def _resume(self, ex: OutgoingMessage, cut: StreamCut) -> Raw:
        # A server that resumes the stream on the session's push stream instead ends
        # this wait when it sends the answer there (``InFlight.keep``).
        async def get(event_id: str) -> Raw:
            headers = self._head.stream(ex.session, event_id)
            return await self._out.post(b"GET", b"", headers, ex, self._resumed)

        return await resume_call(self.alias, ex.resume, cut, get, self._is_closed)

    async def _resumed(self, conn: HttpConnection, head: ResponseHead, ex: OutgoingMessage) -> Raw:
        await check_stream_reply(self.alias, conn, head, "GET", had_session=False)
        return await self._read_answer(conn, head, ex)

    async def _open_push(self, last_event_id: str | None, reader: PushReader) -> None:
        what = "GET (server-push stream)"
        ex = OutgoingMessage(what, None, self._session.for_message(what))
        self._push_session = ex.session
        headers = self._head.stream(ex.session, last_event_id)

        async def read(conn: HttpConnection, head: ResponseHead, ex: OutgoingMessage) -> None:
            # SessionExpired ends this stream but leaves the id alone: the next call
            # finds out by itself and starts a new session, which the stream waits for.
            had_session = ex.session is not None
            await check_stream_reply(self.alias, conn, head, str(ex), had_session=had_session)
            await reader.read(conn, head)

        await self._out.post(b"GET", b"", headers, ex, read, pool=self._push_pool)

    def _is_closed(self) -> bool:
        return self._closed

    async def _answer_server_request(self, req: rpc.Request) -> None:
        await post_answer(self._out, self._head, self._session, self.on_request, req, self._pace)

    async def _new_session(self) -> None:
        """Wait until a handshake starts a session other than the push stream's."""
        await self._session.other_than(self._push_session)


@contextlib.asynccontextmanager
async def open_http_transport(
    alias: str,
    url: str,
    params: HttpParams = DEFAULT_HTTP_PARAMS,
    *,
    on_notification: NotificationHandler | None = None,
    auth: AuthHook | None = None,
) -> AsyncIterator[HttpTransport]:
    """A transport for one Streamable HTTP endpoint; leaving it ends a legacy session.

    ``params.read_timeout`` bounds the silence between two reads (None: no bound);
    the time a whole request may take is the caller's, e.g. ``trio.fail_after``.
    """
    transport = HttpTransport(alias, url, params, on_notification=on_notification, auth=auth)
    try:
        async with transport._sends.running():
            yield transport
    finally:
        await transport.aclose()
