"""A legacy session's server-push stream (GET), and resuming a call's event stream.

Legacy Streamable HTTP (2025-03-26 to 2025-11-25) lets a client open one stream
that belongs to no request: a GET with ``Accept: text/event-stream``. The server
pushes notifications on it (``tools/list_changed`` when its tools change) and
requests (``ping``), which the client answers by POST. The stream is optional and
long-lived: 405 (or another 4xx) says the server offers none, and a stream that
ends or drops is opened again after a delay, with ``Last-Event-ID`` so the server
can replay what it sent meanwhile. ``PushStream`` holds it open; ``PushReader``
reads one connection's worth of it.

The same ids serve a call whose event stream ends before its response: the client
waits the stream's ``retry`` time and takes the response from a GET with the last
``Last-Event-ID`` (the request itself is never sent again). ``ResumePoint``
(``protocol.http.sse``) keeps where such a stream got to.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

import trio
from msgspec import Raw

from protocol.http.parts import ResponseHead
from protocol.http.sse import EventTooLarge, ResumePoint, SSEDecoder, SSEError, SSEEvent, data_cost
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.refused_replies import refuse_each
from protocol.shown.logfields import log_extra
from protocol.shown.visible import quoted_id

from ..base import NotificationHandler
from ..complaints import Complain, said_too_large
from ..errors import (
    InvalidResponse,
    SessionExpired,
    StreamCut,
    TransportError,
    UnexpectedReply,
)
from ..read_pace import Paced, ReadPace
from .connection import HttpConnection
from .reply import (
    SNIPPET,
    ServerRequestSink,
    content_type_words,
    decode_reply,
    deliver,
    named_twice_reply,
    status_error,
    unasked_coding,
)

logger = logging.getLogger("mcpd.http")

# How often a call's cut stream is resumed before the call fails.
RESUME_ATTEMPTS: Final = 3
# The longest wait between two attempts at a push stream that keeps failing.
MAX_REOPEN_DELAY: Final = 60.0
# The shortest wait between two push streams, whatever ``retry`` the server names: a
# server that ends each stream at once with ``retry: 0`` would have mcpd open them
# without pause.
MIN_REOPEN_DELAY: Final = 0.1
# Statuses that refuse a push stream for now, not for good: 409 is the TS SDK's
# answer while it still holds the stream of a connection we gave up on.
_TRANSIENT: Final = frozenset({408, 409, 429})


class StreamRefused(TransportError):
    """The server answered a GET with something other than an event stream."""

    def __init__(self, reason: str, *, status: int, retry_after: float | None = None) -> None:
        super().__init__(reason, retry_after=retry_after)
        self.status = status

    @property
    def transient(self) -> bool:
        return self.status in _TRANSIENT or self.status >= 500


class ResumableCut(Exception):
    """A legacy call's event stream ended early, after an event id: it can be resumed."""

    def __init__(self, cut: StreamCut) -> None:
        super().__init__(cut.reason)
        self.cut = cut


async def check_stream_reply(
    label: str, conn: HttpConnection, head: ResponseHead, what: str, *, had_session: bool
) -> None:
    """Refuse a reply to a GET that opens no stream (SessionExpired if the session is gone)."""
    if 200 <= head.status < 300 and head.status not in (202, 204):
        return
    body = await conn.read_prefix(SNIPPET)
    exc = status_error(
        label, head, body, what, had_session=had_session, now=time.time(), peer=conn.peer
    )
    if isinstance(exc, SessionExpired):
        raise exc
    if isinstance(exc, TransportError):
        raise StreamRefused(exc.reason, status=head.status, retry_after=exc.retry_after)
    raise StreamRefused(f"{label}: HTTP {head.status} to {what}: {exc}", status=head.status)


async def resume_call(
    label: str,
    point: ResumePoint,
    cut: StreamCut,
    get: Callable[[str], Awaitable[Raw]],
    closed: Callable[[], bool],
) -> Raw:
    """The response of a call whose stream was cut, from the stream resumed with GET;
    or, when that fails too, the cut."""
    why = cut.reason
    for _ in range(RESUME_ATTEMPTS):
        assert point.event_id is not None
        logger.debug(
            "%s; resuming after event %s in %.3g s", cut.reason, point.event_id, point.delay
        )
        # The server said how long to wait (retry:); it may not be ready any sooner.
        await trio.sleep(point.delay)
        try:
            return await get(point.event_id)
        except ResumableCut as again:
            why = again.cut.reason
        except StreamRefused as exc:
            why = exc.reason
            if not exc.transient:
                break  # the server does not resume this stream
        except TransportError as exc:
            if closed():
                raise
            why = exc.reason
    raise StreamCut(f"{cut.reason}; resuming it failed: {why.removeprefix(label + ': ')}")


class PushReader:
    """Reads one push stream to its end, handing each message on as it comes."""

    def __init__(
        self,
        label: str,
        max_event: int,
        on_notification: NotificationHandler | None,
        on_request: ServerRequestSink,
        on_response: Callable[[rpc.Response | rpc.ErrorResponse], bool] | None = None,
        *,
        complain: Complain,
        pace: ReadPace,
        on_unusable: Callable[[object, str], bool] | None = None,
    ) -> None:
        """``on_response`` takes a response no request on the stream waits for (False:
        nobody wanted it either), and ``on_unusable`` one that cannot be taken (its id as
        given, what is wrong with it; False: it answered no request); ``complain``
        rations the warnings about what is skipped (None: stay quiet): a server can send
        those without pause. The stream is read within the server's ``pace``."""
        self._label = label
        self._on_notification = on_notification
        self._on_request = on_request
        self._on_response = on_response
        self._on_unusable = on_unusable
        self._complain = complain
        self._pace = pace
        self.on_open: Callable[[], None] | None = None  # the server answered with a stream
        self.decoder = SSEDecoder(max_event)
        self.opened = False  # the server answered with an event stream
        self.messages = 0

    async def read(self, conn: HttpConnection, head: ResponseHead) -> None:
        coded = unasked_coding(head)
        if head.media_type != "text/event-stream" or coded is not None:
            await conn.read_prefix(0)
            said = coded or f"GET answered with {content_type_words(head)}, not an event stream"
            raise StreamRefused(f"{self._label}: {said}", status=head.status)
        self.opened = True
        if self.on_open is not None:
            self.on_open()
        logger.debug("%s: server-push stream open", self._label)
        decoder = self.decoder
        try:
            with self._pace.stream() as paced:
                chunk: bytes | None = b""
                while chunk is not None:
                    await paced.before_read(decoder.held)
                    chunk = await conn.next_chunk()
                    await self._take(chunk, paced)
        except SSEError as exc:
            cut = StreamCut(f"{self._label}: {exc} on the server-push stream")
            if isinstance(exc, EventTooLarge):
                said_too_large(self._label, cut.reason, self._complain)
            raise cut from None

    async def _take(self, chunk: bytes | None, paced: Paced) -> None:
        """Hand on the events ``chunk`` completes (None: the stream's end), and charge
        ``paced`` what reading them cost. None is held here once the stream is read on."""
        decoder = self.decoder
        before, units = decoder.line_cost, 0.0
        try:
            events = decoder.flush() if chunk is None else decoder.feed(chunk)
        except SSEError:
            paced.read(decoder.line_cost - before)  # an event cut for its size, too
            raise
        for event in events:
            units += data_cost(event, answered=await self._on_event(event))
        paced.read(units + decoder.line_cost - before)

    async def _on_event(self, event: SSEEvent) -> bool:
        """Hand one event on; whether it answered a request of ours that waited."""
        if event.event != "message" or not event.data.strip():
            return False  # a priming event, or an event type MCP does not use
        try:
            msg = decode_reply(event.data, 200, self._label, "server-push stream")
        except TransportError as exc:
            self._unusable(exc)
            return False
        self.messages += 1
        if isinstance(msg, rpc.Notification):
            deliver(self._label, self._on_notification, msg, self._complain)
        elif isinstance(msg, rpc.Request):
            # The server may wait for this answer before it sends anything else.
            await self._on_request(msg)
        elif self._on_response is not None and self._on_response(msg):
            return True
        else:
            self._stray(msg, event.data)
        return False

    def _stray(self, msg: rpc.Response | rpc.ErrorResponse, data: bytes) -> None:
        """A sound response no request took: one that gives its ``"id"`` more than once
        fails each waiting request it names; any other is ignored."""
        twice = named_twice_reply(data, 200, self._label, "server-push stream")
        if twice is not None:
            self._unusable(twice)
            return
        note = self._complain()
        if note is not None:
            logger.warning(
                "%s: ignored a response for id %s on the server-push stream%s",
                self._label,
                quoted_id(msg.id),
                note,
                extra=log_extra(self._label, "stray_response"),
            )

    def _unusable(self, exc: TransportError) -> None:
        """An event that holds no message to take: the failure of each request it names
        that waits (a response that cannot be taken), or (naming none) a warning. One bad
        event costs only itself; the stream goes on."""
        refuse = self._on_unusable
        if (
            isinstance(exc, InvalidResponse)
            and refuse is not None
            and refuse_each(exc.given, exc.why, refuse)
        ):
            return
        note = self._complain()
        if note is not None:
            logger.warning("%s%s", exc.reason, note, extra=log_extra(self._label, "bad_push_event"))


OpenPush = Callable[[str | None, PushReader], Awaitable[None]]


class PushStream:
    """Opens the push stream, and opens it again whenever it ends, until refused.

    ``open`` sends the GET (with ``Last-Event-ID`` when given) and reads the reply
    with the reader until the stream ends. The wait before the next GET is the
    server's ``retry`` time (at least ``MIN_REOPEN_DELAY``), or a second; it doubles
    (up to a minute) while attempts fail or streams end without a message, unless the
    server named its ``retry`` time, which is how it asks to be polled. A session the server forgot
    is not asked for again: the stream waits for the next handshake. A stream that
    failed on what the server sent (not HTTP, or not an answer) is said in the journal,
    within the server's ``complain`` budget: nothing else would tell of it.
    """

    def __init__(
        self,
        label: str,
        open: OpenPush,
        new_reader: Callable[[], PushReader],
        closed: Callable[[], bool],
        new_session: Callable[[], Awaitable[None]],
        complain: Complain,
    ) -> None:
        self._label = label
        self._complain = complain
        self._open = open
        self._new_reader = new_reader
        self._closed = closed
        self._new_session = new_session
        self._resume = ResumePoint()
        self._failures = 0

    async def hold(self, tried: Callable[[], None] | None = None) -> None:
        """``tried`` is called after the first attempt, whatever came of it."""
        while not self._closed():
            reader = self._new_reader()
            retry_after: float | None = None
            failed = False
            try:
                try:
                    await self._open(self._resume.event_id, reader)
                finally:
                    if tried is not None:
                        tried()
                why = "the server ended it"
            except SessionExpired:
                logger.debug(
                    "%s: server-push stream: session gone; waiting for a new one", self._label
                )
                # Event ids belong to the session they came from.
                self._resume = ResumePoint()
                await self._new_session()
                continue
            except StreamRefused as exc:
                if not exc.transient:
                    logger.debug("%s: no server-push stream: %s", self._label, exc.reason)
                    return
                why, retry_after = exc.reason, exc.retry_after
            except TransportError as exc:
                why = exc.reason
                failed = isinstance(exc, UnexpectedReply)
            if self._closed():
                return
            self._resume.update(reader.decoder)
            delay = max(self._next_delay(reader), retry_after or 0.0)
            if failed:
                self._said_failed(why, delay)
            else:
                logger.debug(
                    "%s: server-push stream closed (%s); opening it again in %.3g s",
                    self._label,
                    why,
                    delay,
                )
            await trio.sleep(delay)

    def _said_failed(self, why: str, delay: float) -> None:
        note = self._complain()
        if note is None:
            return
        what = why.removeprefix(f"{self._label}: ")
        logger.warning(
            "%s: the server-push stream failed: %s; opening it again in %.3g s%s",
            self._label,
            what,
            delay,
            note,
            extra=log_extra(self._label, "push_stream_failed", what),
        )

    def _next_delay(self, reader: PushReader) -> float:
        base = max(self._resume.delay, MIN_REOPEN_DELAY)
        if reader.opened and (reader.messages or self._resume.retry_ms is not None):
            self._failures = 0
            return base
        self._failures += 1
        return min(base * 2.0 ** (self._failures - 1), max(base, MAX_REOPEN_DELAY))
