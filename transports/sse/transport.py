"""The HTTP+SSE transport of MCP 2024-11-05: one event stream in, one POST per message out.

The client opens a GET event stream at the configured URL. The server's first event,
``endpoint``, names where to POST messages (mostly a relative path with a session id
in its query). That URL must be on the stream's own origin: the configured headers
carry credentials, and they go wherever the messages go. Each JSON-RPC message is
POSTed there and merely accepted (202, or 200); every response, notification and
server request comes back on the stream as a ``message`` event, and responses are
routed to the waiting requests by id. A response that cannot be taken (both a result
and an error, an id of the wrong type, a batch of responses, an ``"id"`` given twice)
fails at once each waiting request it answered, as on stdio
(``protocol.jsonrpc.refused_replies``).

The stream is the session, so this transport never reconnects. When the stream ends
or drops, or the endpoint stops taking messages (404: the server forgot the session,
as after a restart), every pending request fails at once with what happened, and
``error`` and ``closed`` are set. The runner watches ``closed`` and leaves the
transport; the supervisor opens a new one after its backoff and runs the handshake
again, as it does for a stdio server whose process exited.

Credentials that change (OAuth access tokens) come from an ``AuthHook``, as for
Streamable HTTP and through the same ``with_authorization``: on the stream's GET and
on every POST, with the message sent once more when a refusal brings a new value.

The protocol has no session to end: closing the stream is how a client leaves.
``detect_http_transport`` applies the spec's rule for telling this transport from
Streamable HTTP at one URL (in ``detect``). The stream itself (opening it,
following its redirects, reading its events, why it ended) is ``event_stream``'s.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping

import trio
from msgspec import Raw

from protocol.http.mcp_headers import TRANSPORT_HEADERS
from protocol.http.parts import ResponseHead, header_list, parse_url
from protocol.http.sse import SSEEvent
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.refused_replies import refuse_each
from protocol.jsonrpc.splice import SplicedCall
from protocol.shown.logfields import log_extra
from protocol.shown.visible import quote

from ..base import MAX_ANSWERING, AuthHook, NotificationHandler, Params, ReplySink, Transport
from ..best_effort import POST_TIMEOUT, send_answer, send_cancel
from ..complaints import Complaints
from ..errors import InvalidResponse, TransportClosed, TransportError, single_exceptions
from ..http.connection import client_tls
from ..http.params import DEFAULT_HTTP_PARAMS, HttpParams
from ..http.pool import ConnectionPool
from ..http.reply import decode_reply, deliver, status_error
from ..http.request import IDENTITY
from ..http.send import authorized, with_authorization
from ..pending import PendingRequests
from ..read_pace import ReadPace
from ..sends import Sends
from .event_stream import ERROR_BODY_LIMIT, EventStream, Taken
from .events import encoded, endpoint_target, event_message, session_gone

__all__ = ["LegacySSETransport", "open_legacy_sse_transport"]

logger = logging.getLogger("mcpd.sse")


class LegacySSETransport(Transport):
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
        self._origin, self._stream_target = parse_url(url)
        self.endpoint: str | None = None  # where messages go, once the stream named it
        self._post_target = ""
        self._static = header_list(params.headers, "configured", TRANSPORT_HEADERS)
        self._max_body = params.max_body
        self._on_notification = on_notification
        self._ssl_context = client_tls(
            self._origin.scheme, verify=params.tls_verify, ca_file=params.ca_file
        )
        self._pool = ConnectionPool(
            self._origin,
            alias,
            size=params.pool_size,
            ssl_context=self._ssl_context,
            connect_timeout=params.connect_timeout,
            read_timeout=params.read_timeout,
        )
        self._stream = EventStream(
            alias,
            self._origin,
            self._stream_target,
            self._static,
            ssl_context=self._ssl_context,
            connect_timeout=params.connect_timeout,
            max_body=params.max_body,
        )
        self._stream.auth = auth
        self._ids = rpc.IdAllocator()
        # One budget for the warnings about what the server sends, and one for reading it.
        self._complaints = Complaints()
        self._pace: ReadPace = ReadPace(alias, params.max_body, params.read_budget)
        self._pending = PendingRequests(alias, logger, self._complaints.admit, self._answered_late)
        self._reading = trio.CancelScope()
        self._nursery: trio.Nursery | None = None
        self._answering = 0
        self._unanswered = 0  # requests left unanswered since answers last kept up
        # Requests sent without their sender waiting (calls): each waits in a task.
        self._sends = Sends(alias, lambda m, params, h: self.request(m, params, headers=h))

    @property
    def auth(self) -> AuthHook | None:
        return self._stream.auth

    @auth.setter
    def auth(self, hook: AuthHook | None) -> None:
        self._stream.auth = hook

    @property
    def url(self) -> str:
        return f"{self._origin}{self._stream_target}"

    async def request(
        self,
        method: str,
        params: Params | SplicedCall,
        *,
        headers: Mapping[str, str] | None = None,
        cancellable: bool = True,
    ) -> Raw:
        """``params`` may be a ``SplicedCall``, for ``send``."""
        if self.error is not None:
            raise self.error
        extra = header_list(headers or {}, "request", TRANSPORT_HEADERS)
        rid = self._ids.next()
        slot = self._pending.wait(rid)
        try:
            # The response may come on the stream before the POST is accepted: the slot
            # is there first, so it is kept either way.
            if type(params) is SplicedCall:
                body: bytes = params.body(rid)
            else:
                body = rpc.encode_request(rid, method, params)
            await self._post(body, extra, f"{method} (id {rid})")
            await slot.event.wait()
        except trio.Cancelled:
            self._pending.abandon(rid)
            if cancellable and not slot.done and self.error is None:
                # The stream stays open after a caller gives up, so nothing but a
                # notification tells the server.
                with trio.move_on_after(POST_TIMEOUT, shield=True):
                    await send_cancel(self.alias, logger, rid, self._post_cancel)
            raise
        finally:
            self._pending.drop(rid)
        if slot.error is not None:
            raise slot.error
        assert slot.result is not None
        return slot.result

    async def notify(
        self, method: str, params: Params, *, headers: Mapping[str, str] | None = None
    ) -> None:
        extra = header_list(headers or {}, "request", TRANSPORT_HEADERS)
        await self._post(rpc.encode_notification(method, params), extra, method)

    def send(
        self,
        method: str,
        params: Params | SplicedCall,
        reply: ReplySink,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> rpc.Id:
        """``request``, in a task of the transport's that hands the answer to ``reply``."""
        if self.error is not None:
            raise self.error
        return self._sends.send(method, params, reply, headers)

    def forget(self, rid: rpc.Id, reason: str) -> None:
        """Cancel the request where it waits, which tells the server."""
        self._sends.forget(rid)

    async def aclose(self) -> None:
        """End the stream and drop every connection; bounded, and safe to call twice."""
        self._close(TransportClosed(f"{self.alias}: transport closed"))
        with trio.CancelScope(shield=True):
            await self._pool.aclose()

    # -- the stream --

    async def _hold(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Open the stream, wait for its endpoint, then read it until it ends.

        Until the endpoint is known a failure is raised, out of the transport's
        opening; after that, a failure closes the transport instead.
        """
        with self._reading, self._pace.stream() as paced:
            why = await self._stream.read(
                self._on_event, paced, task_status, self._complaints.admit
            )
            if self.endpoint is None:
                raise why
            self._close(why)

    def _on_event(self, event: SSEEvent) -> Taken:
        """Handle one event; say whether it named the endpoint the stream was waiting
        for, or answered a request that waited."""
        if event.event == "endpoint":
            if self.endpoint is not None:
                logger.debug("%s: ignored a second endpoint event", self.alias)
                return None
            self._post_target = endpoint_target(self.alias, self.url, self._origin, event.data)
            self.endpoint = f"{self._origin}{self._post_target}"
            logger.debug("%s: messages go to %s", self.alias, self._post_target.split("?")[0])
            return "endpoint"
        if event.event != "message" or not event.data.strip():
            return None
        msg = event_message(event, self.alias, self._complaints.admit, self._pending.refuse)
        if isinstance(msg, rpc.Response | rpc.ErrorResponse):
            return "answer" if self._pending.route(msg, event.data) else None
        elif isinstance(msg, rpc.Notification):
            if msg.method != "notifications/cancelled" or not self._pending.server_cancelled(msg):
                deliver(self.alias, self._on_notification, msg, self._complaints.admit)
        elif msg is not None and self._nursery is not None:
            if self._answering >= MAX_ANSWERING:
                # No refusal either: here that would be a POST, and a task, of its own.
                self._unanswered += 1
                if self._unanswered == 1:
                    logger.warning(
                        "%s: the server asks faster than it takes the answers: %d are on "
                        "their way, so its %s request (and any more until one is taken) "
                        "gets none",
                        self.alias,
                        self._answering,
                        msg.method,
                        extra=log_extra(self.alias, "server_request_unanswered"),
                    )
                return None
            # Answered on the side, so the stream goes on meanwhile.
            self._answering += 1
            self._nursery.start_soon(self._answer_server_request, msg)
        return None

    def _close(self, error: TransportError) -> None:
        if self.error is not None:
            return
        self.error = error
        self._pending.fail_all(error)
        self._reading.cancel()
        self.closed.set()
        logger.debug("%s: %s", self.alias, error.reason)

    # -- sending --

    async def _post(self, body: bytes, extra: list[tuple[str, str]], what: str) -> None:
        if self.error is not None:
            raise self.error
        given = {name.lower() for name, _ in extra}
        headers = encoded(
            [
                ("Host", self._origin.authority),
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                IDENTITY,
                *[(name, value) for name, value in self._static if name.lower() not in given],
                *extra,
            ]
        )

        async def send(authorization: str | None) -> None:
            await self._post_once(authorized(headers, authorization), body, what)

        await with_authorization(self.auth, send)

    async def _post_once(self, headers: list[tuple[bytes, bytes]], body: bytes, what: str) -> None:
        async with self._pool.connection() as conn:
            await conn.send(b"POST", self._post_target.encode(), headers, body)
            head = await conn.receive_head()
            accepted = 200 <= head.status < 300
            if accepted and head.media_type == "application/json":
                with self._pace.stream() as paced:
                    reply = await conn.read_body(head, self._max_body, paced)
            else:
                reply = await conn.read_prefix(ERROR_BODY_LIMIT)
        if not accepted:
            raise self._rejected(head, reply, what, conn.peer)
        if head.media_type == "application/json" and reply.strip():
            self._answer_in_body(reply)

    def _answer_in_body(self, body: bytes) -> None:
        # Not the protocol, but a server may answer in the POST's own reply; a response
        # found there is as good (or as bad) as one on the stream.
        try:
            msg = decode_reply(body, 200, self.alias, "reply to a POST")
        except InvalidResponse as exc:
            refuse_each(exc.given, exc.why, self._pending.refuse)
            return
        except TransportError:
            return
        if isinstance(msg, rpc.Response | rpc.ErrorResponse) and msg.id is not None:
            self._pending.route(msg, body)

    def _rejected(self, head: ResponseHead, body: bytes, what: str, peer: str | None) -> Exception:
        if session_gone(head, body):
            text = body.decode("utf-8", "replace").strip()
            gone = TransportClosed(
                f"{self.alias}: the server no longer takes messages for this session "
                f"(HTTP {head.status} to {what}" + (f": {quote(text, 200)})" if text else ")")
            )
            self._close(gone)
            return gone
        return status_error(
            self.alias, head, body, what, had_session=False, now=time.time(), peer=peer
        )

    async def _post_cancel(self, body: bytes) -> None:
        await self._post(body, [], "notifications/cancelled")

    async def _answer_server_request(self, req: rpc.Request) -> None:
        async def post(body: bytes) -> None:
            await self._post(body, [], f"the answer to {req.method}")

        try:
            if await send_answer(
                self.alias, logger, self.on_request, req, post, self._pace.answered_itself
            ):
                self._unanswered = 0
        finally:
            self._answering -= 1


@contextlib.asynccontextmanager
async def open_legacy_sse_transport(
    alias: str,
    url: str,
    params: HttpParams = DEFAULT_HTTP_PARAMS,
    *,
    on_notification: NotificationHandler | None = None,
    auth: AuthHook | None = None,
) -> AsyncIterator[LegacySSETransport]:
    """A transport for one HTTP+SSE server, entered once the stream named its endpoint.

    Opening raises what kept the stream from opening (``AuthError`` for 401/403, a
    ``TransportError`` when no endpoint came within ``params.connect_timeout``, an
    ``UnexpectedReply`` for an endpoint on another origin). ``params.read_timeout``
    bounds the silence while a POST is answered, never the stream's.
    """
    transport = LegacySSETransport(alias, url, params, on_notification=on_notification, auth=auth)
    try:
        with single_exceptions():
            async with trio.open_nursery() as nursery:
                transport._nursery = transport._sends.nursery = nursery
                await nursery.start(transport._hold)
                try:
                    yield transport
                finally:
                    transport._sends.nursery = None
                    await transport.aclose()
                    nursery.cancel_scope.cancel()
    finally:
        await transport.aclose()
