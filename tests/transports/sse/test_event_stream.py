"""The HTTP+SSE transport's event stream on its own: opening the GET, handing on each
event, and the error that says how the stream ended."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
import trio

from protocol.http.parts import Origin
from protocol.http.sse import SSEEvent
from tests.support.http_servers.serving import HttpServer, Responder, SeenRequest, serve_http
from transports.complaints import Complaints
from transports.errors import (
    HTTPStatusError,
    StreamCut,
    TransportClosed,
    TransportError,
    UnexpectedReply,
)
from transports.http.connection import MAX_INTERIM
from transports.read_pace import ReadPace
from transports.sse.event_stream import MAX_REDIRECTS, EventStream, Taken

LIMIT = 10
ENDPOINT = b"event: endpoint\ndata: /messages?s=1\n\n"


def stream_of(srv: HttpServer, *, max_body: int = 1 << 20, timeout: float = 5.0) -> EventStream:
    return EventStream(
        "old",
        Origin("http", srv.host, srv.port),
        "/sse",
        [("X-Team", "a")],
        ssl_context=None,
        connect_timeout=timeout,
        max_body=max_body,
    )


class Seen:
    """What the stream handed on; the first endpoint event taken as the transport does."""

    def __init__(self) -> None:
        self.events: list[SSEEvent] = []

    def __call__(self, event: SSEEvent) -> Taken:
        self.events.append(event)
        return "endpoint" if event.event == "endpoint" and len(self.endpoints()) == 1 else None

    def endpoints(self) -> list[SSEEvent]:
        return [e for e in self.events if e.event == "endpoint"]


async def read_all(stream: EventStream, seen: Seen) -> TransportError:
    """Read the stream to its end, as the transport does from its opening."""
    ended: list[TransportError] = []

    async def reading(task_status: trio.TaskStatus[None]) -> None:
        with ReadPace("old", 1 << 20).stream() as paced:
            ended.append(await stream.read(seen, paced, task_status, Complaints().admit))

    async with trio.open_nursery() as nursery:
        await nursery.start(reading)
    return ended[0]


async def read_unstarted(stream: EventStream, seen: Callable[[SSEEvent], Taken]) -> TransportError:
    """Read the stream to its end outside of a nursery's start."""
    with ReadPace("old", 1 << 20).stream() as paced:
        return await stream.read(seen, paced, trio.TASK_STATUS_IGNORED, Complaints().admit)


async def test_the_get_asks_for_a_stream_with_the_configured_headers() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.sse(ENDPOINT)

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            why = await read_all(stream_of(srv), Seen())
    (get,) = srv.requests
    assert (get.method, get.target) == ("GET", "/sse")
    assert get.header("accept") == "text/event-stream"
    assert get.header("x-team") == "a"
    assert get.header("host") == f"{srv.host}:{srv.port}"
    assert isinstance(why, TransportClosed)
    assert why.reason == "old: the server ended the event stream"


async def test_events_split_anywhere_with_mixed_line_endings_and_a_bom_arrive_whole() -> None:
    # A BOM, then an endpoint and two messages ended by CR, LF and CRLF in turn,
    # with a comment, an id carrying a NUL (not taken) and a retry out of range.
    wire = (
        b"\xef\xbb\xbf: hello\r"
        b"event: endpoint\rdata: /messages?s=1\r\r"
        b'id: 7\nretry: 99999999999999999999\ndata: {"a":\ndata: 1}\n\n'
        b"id: x\x00y\r\nretry: -5\r\ndata: two\r\n\r\n"
    )

    async def handler(req: SeenRequest, respond: Responder) -> None:
        # One byte a chunk: every field, line ending and the BOM are split.
        await respond.sse(*[wire[i : i + 1] for i in range(len(wire))])

    seen = Seen()
    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            why = await read_all(stream_of(srv), seen)
    assert seen.events == [
        SSEEvent(b"/messages?s=1", "endpoint"),
        SSEEvent(b'{"a":\n1}', id="7", retry=None),
        SSEEvent(b"two", id="7"),
    ]
    assert isinstance(why, TransportClosed)
    assert why.reason == "old: the server ended the event stream"


async def test_a_last_event_the_stream_ends_inside_is_dropped() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.sse(ENDPOINT, b'data: {"jsonrpc": "2.0", "method": "notifica')

    seen = Seen()
    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            await read_all(stream_of(srv), seen)
    assert [e.data for e in seen.events] == [b"/messages?s=1"]


@pytest.mark.parametrize("named", [False, True], ids=["before the endpoint", "after it"])
async def test_an_event_that_never_ends_is_cut_at_the_limit_and_said(
    named: bool, caplog: pytest.LogCaptureFixture
) -> None:
    gone = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.sse_start()
        if named:
            await respond.send(ENDPOINT)
        await respond.send(b"data: ")
        # An endless data line, until the client hangs up.
        try:
            while True:
                await respond.send(b"x" * 4096)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            gone.set()

    seen = Seen()
    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            stream = stream_of(srv, max_body=64 * 1024)
            if named:
                why = await read_all(stream, seen)
            else:
                why = await read_unstarted(stream, seen)
            await gone.wait()
    assert isinstance(why, StreamCut)
    assert why.reason == "old: event stream event larger than 65536 bytes on the event stream"
    assert len(seen.events) == int(named)
    said = [r for r in caplog.records if getattr(r, "mcpd_event", None) == "event_too_large"]
    assert [(r.levelno, r.getMessage()) for r in said] == [(logging.WARNING, why.reason)]


async def test_a_stream_cut_mid_event_says_so_once() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.sse_start()
        await respond.send(ENDPOINT + b'data: {"half')
        await respond.cut()

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            why = await read_all(stream_of(srv), Seen())
    assert isinstance(why, StreamCut)
    assert why.reason == (
        "old: the event stream was cut: the server closed the connection while reading "
        "the response body"
    )


async def test_a_stream_of_comments_alone_does_not_hold_the_opening_open() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.sse_start()
        # Keep-alives as fast as the client reads them, and never an endpoint.
        try:
            while True:
                await respond.send(b": still here\n\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    seen = Seen()
    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            stream = stream_of(srv, timeout=0.2)
            why = await read_unstarted(stream, seen)
    assert type(why) is TransportError
    assert why.reason == f'old: the event stream at "{stream.url}" named no endpoint within 0.2 s'
    assert seen.events == []


async def test_a_server_that_never_answers_the_get() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.wait_disconnect()

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            stream = stream_of(srv, timeout=0.2)
            why = await read_unstarted(stream, Seen())
    assert why.reason == f'old: the event stream at "{stream.url}" did not open within 0.2 s'


async def test_interim_responses_without_end_to_the_get_fail_the_stream_with_the_reason() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.flood(b"HTTP/1.1 102 Processing\r\n\r\n" * 1000)

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            # Only the bound can end the opening: its deadline is far off.
            why = await read_unstarted(stream_of(srv, timeout=3600.0), Seen())
    assert isinstance(why, UnexpectedReply)
    assert why.reason == f"old: more than {MAX_INTERIM} interim (1xx) responses before the answer"


async def test_redirects_are_followed_a_bounded_number_of_times() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        hop = int(req.target.rpartition("/")[2] or 0) if req.target != "/sse" else 0
        await respond.reply(307, "", {"Location": f"/hop/{hop + 1}"})

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            why = await read_unstarted(stream_of(srv), Seen())
    assert why.reason == f"old: more than {MAX_REDIRECTS} redirects for the stream"
    targets = [r.target for r in srv.requests]
    assert targets == ["/sse", *[f"/hop/{n}" for n in range(1, MAX_REDIRECTS + 1)]]
    # Each hop on a connection of its own, each closed before the next.
    assert srv.connections == MAX_REDIRECTS + 1


async def test_a_redirect_then_a_stream() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.target == "/sse":
            await respond.reply(301, "moved", {"Location": "/v2/sse"})
        else:
            await respond.sse(ENDPOINT)

    seen = Seen()
    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            await read_all(stream_of(srv), seen)
    assert [r.target for r in srv.requests] == ["/sse", "/v2/sse"]
    assert srv.requests[1].header("x-team") == "a"
    assert len(seen.endpoints()) == 1


async def test_a_refusal_of_the_get_is_returned_with_its_status() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.reply(503, "x" * 200_000, {"Content-Type": "text/plain"})

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            why = await read_unstarted(stream_of(srv), Seen())
    assert isinstance(why, HTTPStatusError)
    assert (why.status, why.reason) == (503, "old: HTTP 503")


async def test_an_event_the_transport_refuses_ends_the_stream_with_its_error() -> None:
    gone = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.sse_start()
        await respond.send(ENDPOINT)
        await respond.wait_disconnect()
        gone.set()

    refused = UnexpectedReply("old: refused the endpoint")

    def on_event(event: SSEEvent) -> Taken:
        raise refused

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            why = await read_unstarted(stream_of(srv), on_event)
            # The stream's connection is closed, not left to the server to notice.
            await gone.wait()
    assert why is refused
