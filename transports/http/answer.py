"""Reading a 2xx reply to a request until its response.

``AnswerReader`` takes the single JSON message, or the event stream's notifications
(handed on) and then the response. A legacy server may also send requests on the
stream and wait for their answers; with ``on_request`` they are answered before the
stream is read further. What it ignores on the stream is warned about within the
server's ``Complaints``.

A response that cannot be taken (both a result and an error, an id of the wrong type,
an ``"id"`` given twice, a batch of responses) fails each request it answered at once
(``protocol.jsonrpc.refused_replies``): this one, when it is one of them; another's in
flight (``InFlight``), and this stream is read on. So does a sound response for
another request in flight: which request it answers is in doubt. A JSON reply holds one
message only: when it is such a response for another request, or a response for no
request in flight, this request fails too, as one the server answered unreadably. A
response kept for this request from the push stream is its answer: one here after it
is a duplicate, dropped.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Final, TypeAlias

import trio

from protocol.http.parts import ResponseHead
from protocol.http.sse import EventTooLarge, SSEDecoder, SSEError, SSEEvent, data_cost
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.refused_replies import (
    answered,
    misaddressed,
    names_a_request,
    refusal,
    refuse_each,
    shown_id,
)
from protocol.jsonrpc.reply_faults import MessageTooLarge, too_large_reason
from protocol.shown.logfields import log_extra
from protocol.shown.visible import quote, quoted_id

from ..base import NotificationHandler
from ..complaints import Complain
from ..errors import BodyTooLarge, InvalidResponse, StreamCut, TransportError, UnexpectedReply
from ..read_pace import Paced, ReadPace
from .connection import HttpConnection
from .inflight import InFlight
from .reply import (
    SNIPPET,
    ServerRequestSink,
    decode_reply,
    deliver,
    named_twice_reply,
    unasked_coding,
)

logger = logging.getLogger("mcpd.http")

Answer: TypeAlias = rpc.Response | rpc.ErrorResponse

# Once the response is in, how long the rest of an event stream may take to end
# before its connection is given up rather than waited for.
DRAIN_TIMEOUT: Final = 1.0

# Why a request whose JSON reply answered another in flight (which failed for it) fails.
ANSWERED_ANOTHER: Final = "the answer to another request in flight"


class AnswerReader:
    """Reads one request's 2xx reply up to (and a little past) its response."""

    def __init__(
        self,
        label: str,
        what: str,
        id: rpc.Id | None,
        max_body: int,
        on_notification: NotificationHandler | None,
        on_request: ServerRequestSink | None = None,
        *,
        complain: Complain,
        pace: ReadPace,
        inflight: InFlight | None = None,
    ) -> None:
        """``complain`` rations the warnings about what is ignored (None: stay quiet);
        ``pace`` is the server's, which its every stream reads within; ``inflight``
        holds the transport's other requests, which a response on this stream that
        cannot be taken may have answered."""
        self._label = label
        self._what = what
        self._id = id
        self._max_body = max_body
        self._on_notification = on_notification
        self._on_request = on_request
        self._complain = complain
        self._pace = pace
        self._inflight = inflight
        self._requests: list[rpc.Request] = []
        self._decoder: SSEDecoder | None = None
        self._answered = False  # the response came: any more for this id are duplicates

    @property
    def decoder(self) -> SSEDecoder:
        """The event stream's decoder, made for a reply that is one (a JSON one needs
        none); kept after a stream was cut: its resume_id and retry say how to resume."""
        if self._decoder is None:
            self._decoder = SSEDecoder(self._max_body)
        return self._decoder

    async def read(self, conn: HttpConnection, head: ResponseHead) -> Answer:
        media = head.media_type
        coded = unasked_coding(head)
        if coded is not None:
            body = await conn.read_prefix(SNIPPET)
            raise UnexpectedReply(f"{self._label}: {coded}", status=head.status, body=body)
        if media == "text/event-stream":
            return await self._read_stream(conn, head)
        if media == "application/json":
            with self._pace.stream() as paced:
                try:
                    body = await conn.read_body(head, self._max_body, paced)
                except BodyTooLarge as exc:
                    # The server answered; the answer is too big to pass on. Only this
                    # request fails (not the server, as an unreadable reply would).
                    reason = too_large_reason(self._label, exc.size, exc.limit)
                    raise MessageTooLarge(reason, size=exc.size, limit=exc.limit) from None
                paced.came()
                try:
                    msg = self._decode(body, head, "response body")
                except InvalidResponse as exc:
                    own, elsewhere = self._named(exc)
                    if own is not None:
                        return self._own_unusable(own)
                    why = ANSWERED_ANOTHER if elsewhere else exc.why
                    raise self._unanswered(why) from None
                paced.read(0.0)  # a reply to a request: free of the pace
            if isinstance(msg, (rpc.Response, rpc.ErrorResponse)):
                if msg.id in (self._id, None):
                    return self._took(msg)
                own = misaddressed(msg.id, self._own)
                if own is not None:
                    return self._own_unusable(own)
                if self._inflight is not None and self._inflight.elsewhere(msg.id, self._what):
                    raise self._unanswered(ANSWERED_ANOTHER)
                # A server that swaps ids sends this too, once the other is over.
                shown = quoted_id(msg.id)
                raise self._unanswered(f"a response for no request in flight (id {shown})")
            problem = f"the JSON reply to {self._what} is not its response"
        else:
            body = await conn.read_prefix(SNIPPET)
            written = head.written_media_type
            said = f"content type {quote(written)}" if written else "lack of a content type"
            problem = f"unexpected {said} for {self._what}"
        raise UnexpectedReply(f"{self._label}: {problem}", status=head.status, body=body[:SNIPPET])

    async def _read_stream(self, conn: HttpConnection, head: ResponseHead) -> Answer:
        with self._pace.stream() as paced:
            answer = await self._read_to_answer(conn, head, paced)
            # Read on to the end of the stream, so the connection can carry the next
            # request; a stream that does not end soon, or ends badly, costs only its
            # connection. What is already received (most often all of it: the response
            # was the last event) is read without waiting.
            decoder = self.decoder
            while (at_hand := conn.received_chunk()) is not False:
                try:
                    self._take(at_hand, head, paced)
                except (SSEError, TransportError):
                    return answer
                if at_hand is None:
                    return answer
            with trio.move_on_after(DRAIN_TIMEOUT), contextlib.suppress(TransportError, SSEError):
                chunk: bytes | None = b""
                while chunk is not None:
                    await paced.before_read(decoder.held)
                    chunk = await conn.next_chunk()
                    self._take(chunk, head, paced)
        return answer

    async def _read_to_answer(
        self, conn: HttpConnection, head: ResponseHead, paced: Paced
    ) -> Answer:
        decoder = self.decoder
        answer: Answer | None = None
        events = 0
        try:
            while answer is None:
                await paced.before_read(decoder.held)
                chunk = await conn.next_chunk()
                answer, taken = self._take(chunk, head, paced)
                events += taken
                await self._answer_requests()
                if chunk is None:
                    break
        except EventTooLarge:
            raise MessageTooLarge(
                too_large_reason(self._label, None, self._max_body),
                size=None,
                limit=self._max_body,
            ) from None
        except SSEError as exc:
            raise UnexpectedReply(
                f"{self._label}: {exc} in the reply to {self._what}", status=head.status
            ) from None
        except StreamCut as exc:
            raise StreamCut(
                f"{self._label}: the event stream for {self._what} was cut before its response "
                f"({events} events read)",
                detail=exc.reason,
            ) from None
        if answer is None:
            raise StreamCut(
                f"{self._label}: the event stream for {self._what} ended before its response "
                f"({events} events read)"
            )
        return answer

    def _take(
        self, chunk: bytes | None, head: ResponseHead, paced: Paced
    ) -> tuple[Answer | None, int]:
        """Deliver the events ``chunk`` completes (None: the stream's end); the first
        that is the response waited for, and how many there were. None is held here
        once the stream is read on (a loop's variable would keep the last, a whole
        message, while the next chunk is awaited)."""
        paced.came()
        decoder = self.decoder
        before, units = decoder.line_cost, 0.0
        try:
            events = decoder.flush() if chunk is None else decoder.feed(chunk)
        except SSEError:
            paced.read(decoder.line_cost - before)  # an event cut for its size, too
            raise
        answer: Answer | None = None
        for event in events:
            found = self._on_event(event, head)
            if answer is None and found is not None:
                answer = found
                units += data_cost(event, answered=True)
            else:
                units += data_cost(event, answered=False)
        paced.read(units + decoder.line_cost - before)
        return answer, len(events)

    def _on_event(self, event: SSEEvent, head: ResponseHead) -> Answer | None:
        """Deliver one event; return it if it is the response being waited for."""
        if event.event != "message" or not event.data.strip():
            return None  # priming events and event types MCP does not use
        try:
            msg = self._decode(event.data, head, "event stream")
        except InvalidResponse as exc:
            self._unusable(exc)
            return None
        if isinstance(msg, rpc.Notification):
            self._deliver(msg)
        elif isinstance(msg, rpc.Request):
            if self._on_request is not None:
                self._requests.append(msg)
            else:
                self._ignored(f"server request {msg.method}", "server_request_ignored")
        elif msg.id in (self._id, None):
            return self._took(msg)
        else:
            self._stray(msg.id)
        return None

    def _stray(self, rid: rpc.Id) -> None:
        """A sound response under another id: this request's failure when the id is its
        own of the wrong type, that of another in flight when it is for one (which of
        the two it answers is in doubt); otherwise ignored."""
        own = misaddressed(rid, self._own)
        if own is not None:
            self._fail(own)
            return  # after the response: a duplicate
        if self._inflight is not None and self._inflight.elsewhere(rid, self._what):
            return
        self._ignored(f"a response for id {quoted_id(rid)}", "stray_response")

    def _decode(self, data: bytes, head: ResponseHead, where: str) -> rpc.Message:
        """The message ``data`` holds (``decode_reply``); a response for another id that
        gives its ``"id"`` more than once is one that cannot be taken (raised)."""
        msg = decode_reply(data, head.status, self._label, where)
        if isinstance(msg, rpc.Response | rpc.ErrorResponse) and msg.id not in (self._id, None):
            twice = named_twice_reply(data, head.status, self._label, where)
            if twice is not None:
                raise twice
        return msg

    def _unusable(self, exc: InvalidResponse) -> None:
        """A response on the stream that cannot be taken: the failure of each request it
        names that waits, this one's last; ignored when it answered none. One whose ids
        name no request makes the stream no MCP."""
        own, elsewhere = self._named(exc)
        if own is not None:
            self._fail(own)
            return  # after the response: a duplicate, dropped as a sound one is
        if elsewhere:
            return
        ids = ", ".join(map(shown_id, exc.given))
        self._ignored(
            f"a response for id{'s' if len(exc.given) > 1 else ''} {ids} that cannot be "
            f"taken ({exc.why})",
            "stray_response",
        )

    def _named(self, exc: InvalidResponse) -> tuple[tuple[rpc.Id, str] | None, bool]:
        """Of the requests a response that cannot be taken names: this one's failure (its
        id and what is wrong) when it is one of them, and whether it failed another in
        flight (each it names that waits fails at once). One that names no request at
        all makes the reply no MCP (raised)."""
        own: tuple[rpc.Id, str] | None = None
        others: list[object] = []
        for given in exc.given:
            mine = answered(given, exc.why, self._own)
            if mine is None:
                others.append(given)
            elif own is None:
                own = mine
        inflight = self._inflight
        elsewhere = inflight is not None and refuse_each(tuple(others), exc.why, inflight.refuse)
        if own is None and not elsewhere and not any(map(names_a_request, exc.given)):
            raise exc
        return own, elsewhere

    def _took(self, msg: Answer) -> Answer:
        """The response came: any more for this id, on any stream, are duplicates (its
        connection may yet be closed, a checkpoint at which another could come). The
        answer is the one kept from the push stream, if that came first."""
        self._answered = True
        kept = self._kept()
        if self._inflight is not None and self._id is not None:
            self._inflight.answered(self._id)
        return msg if kept is None else kept

    def _kept(self) -> Answer | None:
        """The response kept for this request from the push stream, if one was."""
        if self._inflight is None or self._id is None:
            return None
        return self._inflight.kept(self._id)

    def _own_unusable(self, own: tuple[rpc.Id, str]) -> Answer:
        """A JSON reply that answers this request but cannot be taken (``own``: its id
        and what is wrong): its failure, unless the push stream's answer came first."""
        kept = self._kept()
        if kept is None:
            raise refusal(self._label, *own, logger)
        return self._took(kept)

    def _unanswered(self, why: str) -> Exception:
        """What this request fails with when its JSON reply could not be taken (``why``):
        the server answered, unreadably, so it is not counted as down."""
        if self._id is None:
            return UnexpectedReply(f"{self._label}: the JSON reply to {self._what} was {why}")
        return refusal(self._label, self._id, why, logger)

    def _fail(self, own: tuple[rpc.Id, str]) -> None:
        """Fail this request, a response that cannot be taken having answered it
        (``own``: its id and what is wrong, from ``protocol.jsonrpc.refused_replies``),
        unless it has its answer already: then that is a duplicate, dropped."""
        if not self._answered and self._kept() is None:
            raise refusal(self._label, *own, logger)

    def _own(self, rid: rpc.Id) -> bool:
        return rid == self._id

    async def _answer_requests(self) -> None:
        # The server may hold back the response until these are answered.
        while self._requests and self._on_request is not None:
            await self._on_request(self._requests.pop(0))

    def _deliver(self, msg: rpc.Notification) -> None:
        deliver(self._label, self._on_notification, msg, self._complain)

    def _ignored(self, what: str, event: str) -> None:
        note = self._complain()
        if note is None:
            return
        logger.warning(
            "%s: ignored %s on the stream of %s%s",
            self._label,
            what,
            self._what,
            note,
            extra=log_extra(self._label, event),
        )
