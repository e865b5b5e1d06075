"""HTTP/1.1 plumbing for the demo servers and the daemon's own HTTP side: h11 over one
trio stream, no MCP in sight.

``Wire`` reads requests (bodies capped) and notices when the client hangs up while a
request runs; ``WireResponse`` answers with one JSON body, or switches to an event
stream as soon as something has to be sent before the answer (a body of another
type says so in its headers).
"""

from __future__ import annotations

import select
from collections.abc import Callable, Iterable
from contextlib import suppress
from http import HTTPStatus
from typing import Final, TypeAlias

import h11
import trio

from protocol.jsonrpc import messages as rpc

from . import headsize
from .body_size import MAX_BODY
from .headmeter import HeadMeter, HeadRoom, OverHead
from .headsize import MAX_HEAD, HeadTooLarge, NoHeadRoom

_REASON: Final = 200  # characters of h11's word on a malformed request passed on
_READ_SIZE: Final = 64 * 1024
# Read ahead of the request being answered: one read's worth, whatever the client
# pipelines; the rest waits in the kernel.
READ_AHEAD: Final = _READ_SIZE

HeaderList: TypeAlias = list[tuple[bytes, bytes]]


def head(status: int, headers: HeaderList) -> h11.Response:
    return h11.Response(status_code=status, headers=headers, reason=HTTPStatus(status).phrase)


class Reject(Exception):
    """Answer the request with this status and body, without running it."""

    def __init__(self, status: int, body: bytes = b"", headers: HeaderList | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or []


class Headers:
    def __init__(self, raw: Iterable[tuple[bytes, bytes]]) -> None:
        self._all: dict[str, list[str]] = {}
        for name, value in raw:
            self._all.setdefault(name.decode("ascii").lower(), []).append(value.decode("latin-1"))

    def get(self, name: str) -> str | None:
        values = self._all.get(name)
        return values[0] if values else None

    def count(self, name: str) -> int:
        return len(self._all.get(name, ()))


def _nothing(request: h11.Request) -> HeaderList:
    return []


def _unbounded(size: int) -> None:
    """Every body may be held, up to ``MAX_BODY``."""


class Wire:
    """One client connection: its socket and the h11 state machine reading it."""

    def __init__(
        self, stream: trio.SocketStream, cookie_room: int = 0, room: HeadRoom | None = None
    ) -> None:
        """``cookie_room``: what a head's cookies may take beyond ``MAX_HEAD``, out of
        the ``room`` shared with other connections."""
        self.stream = stream
        self.cookie_room = cookie_room
        self.meter = HeadMeter(cookie_room, room)
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD + cookie_room)
        # The client hung up, or a write was cut short: nothing more can be sent.
        self.broken = False
        # The connection ends with the answer being written: the answer says so.
        self.closing = False
        # The connection ends once what the client already sent is answered: the answer
        # with nothing of another request behind it says so, and is the last.
        self.leaving = False
        # A request said its body's length twice over (Content-Length beside
        # Transfer-Encoding): a proxy before mcpd may have read it the other way, so
        # nothing behind it on this connection is taken for a request.
        self._framed_twice = False
        # The length of the body the request just read says it has (None: chunked).
        self._declared: int | None = None
        # The headers every answer to a request carries, told by its head (on the TCP
        # endpoint, those that let a page at an allowed origin read it: ``cors``), and
        # those of the request being served.
        self.carried: Callable[[h11.Request], HeaderList] = _nothing
        self._carried: HeaderList = []

    async def _receive(self, most: int = _READ_SIZE) -> None:
        try:
            data = await self.stream.receive_some(most)
        except trio.BrokenResourceError:
            data = b""
        if not data:
            self.broken = True
        self._weigh(data)
        self.conn.receive_data(data)

    def _weigh(self, data: bytes | bytearray) -> None:
        """Weigh what came of a head not yet parsed, before h11 may parse it."""
        if self.meter.ended:
            return
        try:
            self.meter.feed(data)
        except OverHead as exc:
            if not exc.room_left:
                raise NoHeadRoom(str(exc)) from None
            raise HeadTooLarge(f"{exc}; {headsize.bounds(self.cookie_room)}") from None

    async def _next_event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        while (event := self.conn.next_event()) is h11.NEED_DATA:
            if self.conn.their_state is h11.SEND_BODY:
                # Only a chunk's size line or a trailer is kept whole before it is
                # passed on (a body's bytes go as they come), and h11's own bound is
                # the head's, cookies included.
                unread = len(self.conn.trailing_data[0])
                if unread > MAX_HEAD:
                    raise HeadTooLarge(headsize.over_in_body())
            await self._receive()
        # h11 bounds only what has not ended yet; what ends within the read that
        # brought its last bytes comes whole, and is bounded here.
        over = None
        if isinstance(event, h11.Request):
            self.meter.release()
            fields = event.headers.raw_items()
            over = headsize.over_bounds(event.method, event.target, fields, self.cookie_room)
        elif isinstance(event, h11.EndOfMessage) and event.headers:
            over = headsize.over_bounds(b"", b"", event.headers.raw_items(), 0)
        if over is not None:
            raise HeadTooLarge(over)
        return event

    async def read_request(self) -> tuple[h11.Request, bytes] | None:
        request = await self.read_head()
        if request is None:
            return None
        body = await self.read_body()
        return None if body is None else (request, body)

    async def read_head(self) -> h11.Request | None:
        """The next request's line and headers, none of its body (None: no request)."""
        self._carried = []
        self.meter.start()
        self._weigh(self.conn.trailing_data[0])
        request = await self._next_event()
        if not isinstance(request, h11.Request):
            return None
        self._carried = self.carried(request)
        headers = Headers(request.headers)
        length = headers.get("content-length")
        # h11 checked it is one value of digits; beside Transfer-Encoding it counts for
        # nothing.
        chunked = headers.get("transfer-encoding") is not None
        self._framed_twice = self._framed_twice or (chunked and length is not None)
        self._declared = None if chunked or length is None else int(length)
        return request

    async def read_body(self, hold: Callable[[int], None] = _unbounded) -> bytes | None:
        """The body of the request whose head was read (None: it did not end well).
        ``hold`` is told of its bytes before they are read where the head said how
        many, else as they come, and raises Reject where they may not be held."""
        declared = self._declared
        if declared is not None:
            if declared > MAX_BODY:
                raise _too_large(f"its Content-Length says {declared}")
            hold(declared)
        if self.conn.they_are_waiting_for_100_continue:
            # The client holds its body back until told it is wanted.
            await self.send(
                h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")
            )
        # Kept as they come and joined once at the end: the one copy of the body.
        pieces: list[bytes | bytearray] = []
        size = 0
        while True:
            event = await self._next_event()
            if isinstance(event, h11.EndOfMessage):
                return b"".join(pieces)
            if not isinstance(event, h11.Data):
                return None
            size += len(event.data)
            if size > MAX_BODY:
                raise _too_large("more came")
            if declared is None:
                hold(len(event.data))
            pieces.append(event.data)

    def pipelined(self) -> bool:
        """Whether some of another request was read behind the one being answered."""
        return bool(self.conn.trailing_data[0])

    async def wait_gone(self) -> None:
        """Return once the client hangs up; keep whatever it pipelines meanwhile, up to
        ``READ_AHEAD``: past that nothing more is read until this request is answered,
        and the rest waits in the kernel. So what every client sends while its
        request runs costs the daemon one read's worth of memory each at most, and
        a hang-up behind more than that is noticed all the same."""
        while not self.broken:
            room = READ_AHEAD - len(self.conn.trailing_data[0])
            if room <= 0:
                await self._hang_up_unread()
                return
            await self._receive(room)

    async def _hang_up_unread(self) -> None:
        """Return once the client hangs up, reading none of what it sent before.

        The bytes ahead keep the socket readable, so waiting for it to be readable
        says nothing; the kernel is asked for the hang-up alone instead, through an
        epoll set of this socket watching for nothing but its peer's shutdown (and
        the hang-ups and errors epoll always reports). That notices it at once,
        whatever the request writes: a keep-alive would only on a later write, and
        only on requests that write while they run.
        """
        with select.epoll(1) as watch:
            watch.register(self.stream.socket.fileno(), select.EPOLLRDHUP)
            while not watch.poll(0):
                await trio.lowlevel.wait_readable(watch.fileno())
        self.broken = True

    async def send(self, *events: h11.Event) -> None:
        for event in events:
            if self._carried and isinstance(event, h11.Response):
                event = _with(event, self._carried)
            if isinstance(event, h11.Response) and self._last():
                event = _closing(event)
            data = self.conn.send(event)
            if data:
                await self.stream.send_all(data)

    def _last(self) -> bool:
        if self._framed_twice or self.closing:
            return True
        return self.leaving and not self.pipelined()


def _closing(response: h11.Response) -> h11.Response:
    if any(name == b"connection" for name, _ in response.headers):
        return response
    return _with(response, [(b"connection", b"close")])


def _with(response: h11.Response, headers: HeaderList) -> h11.Response:
    return h11.Response(
        status_code=response.status_code,
        headers=[*response.headers, *headers],
        reason=response.reason,
    )


class WireResponse:
    """The answer to one request: a JSON body, or an event stream once one is needed.

    Writing to a client that has gone cancels ``scope``, the request's own. Writes
    are not shielded, so that shutting down never waits on a client that stopped
    reading; a write cut short marks the connection broken instead.
    """

    def __init__(
        self,
        wire: Wire,
        scope: trio.CancelScope | None = None,
        headers: Iterable[tuple[bytes, bytes]] = (),
    ) -> None:
        self.wire = wire
        self.scope = scope
        self.headers = list(headers)
        self.streaming = False
        self._lock = trio.Lock()

    async def json(
        self, status: int, body: bytes, headers: Iterable[tuple[bytes, bytes]] = ()
    ) -> None:
        fields = [*self.headers, *headers]
        if status != 204:  # which has no body, and says nothing of one
            fields.append((b"content-length", str(len(body)).encode()))
        if body and not any(name == b"content-type" for name, _ in fields):
            fields.append((b"content-type", b"application/json"))
        try:
            await self.wire.send(head(status, fields), h11.Data(data=body), h11.EndOfMessage())
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.wire.broken = True  # the client went while it was written
            raise

    async def open_stream(self) -> None:
        await self._write()

    async def event(self, message: bytes) -> None:
        """Send one ``message`` event, switching to a stream if need be."""
        await self._write(h11.Data(data=b"event: message\ndata: " + message + b"\n\n"))

    async def comment(self, text: bytes) -> None:
        """Send an SSE comment (clients skip it): a keep-alive on a quiet stream."""
        await self._write(h11.Data(data=b": " + text + b"\n\n"))

    async def _write(self, *events: h11.Event) -> None:
        async with self._lock:
            if self.wire.broken:
                return
            first: list[h11.Event] = []
            if not self.streaming:
                self.streaming = True
                fields = [
                    *self.headers,
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-cache"),
                    (b"x-accel-buffering", b"no"),
                ]
                first.append(head(200, fields))
            try:
                await self.wire.send(*first, *events)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.wire.broken = True
                if self.scope is not None:
                    self.scope.cancel()
            except BaseException:
                # Cancelled halfway through an event: what the client got so far
                # cannot be continued, so this connection carries nothing more.
                self.wire.broken = True
                raise

    async def finish(self, message: bytes | None, status: int) -> None:
        """Send the answer; ``status`` applies unless the stream already started.

        Without a ``message`` (the request was cancelled) the answer is a stream
        that ends without one.
        """
        if message is not None and not self.streaming:
            await self.json(status, message)
            return
        if message is not None:
            await self.event(message)
        await self._write(h11.EndOfMessage())


def _too_large(said: str) -> Reject:
    message = f"request body too large: at most {MAX_BODY} bytes are read, and {said}"
    return Reject(413, rpc.encode_error(None, rpc.INVALID_REQUEST, message))


async def end_when_set(ends: trio.Event, scope: trio.CancelScope) -> None:
    """End ``scope`` once ``ends`` is set. An event stream so ended between two
    messages, or while it waits for the next, is finished whole by its ``finally``."""
    await ends.wait()
    scope.cancel()


async def refuse_and_close(
    wire: Wire, status: int, body: bytes = b"", headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    """Answer a request that will not be read on (h11 could not parse it, or it was
    refused at its headers), then close, if an answer can still go out."""
    if wire.conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
        return
    with trio.move_on_after(1), suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await WireResponse(wire).json(status, body, [*headers, (b"connection", b"close")])


async def refuse_malformed(wire: Wire, exc: h11.RemoteProtocolError) -> None:
    """Answer a request h11 could not read with the status it suggests, saying what was
    wrong with it, then close."""
    if isinstance(exc, NoHeadRoom):
        message = f"request head not read: {exc}"
        await refuse_and_close(wire, 503, rpc.encode_error(None, rpc.INVALID_REQUEST, message))
        return
    if isinstance(exc, HeadTooLarge):
        why = str(exc)
    elif exc.error_status_hint == 431:  # h11's own bound, on what has not ended
        why = headsize.unended(wire.cookie_room)
    else:
        why = str(exc)[:_REASON]
    message = f"malformed HTTP request: {why}"
    await refuse_and_close(
        wire, exc.error_status_hint, rpc.encode_error(None, rpc.INVALID_REQUEST, message)
    )
