"""Legacy Streamable HTTP streams: the server-push stream (GET) and resuming a call's
event stream with GET + Last-Event-ID."""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any

import pytest
import trio
import trio.testing
from msgspec import Raw

from protocol.jsonrpc.messages import METHOD_NOT_FOUND, Notification, Response
from tests.support.http_servers.serving import (
    LegacySession,
    Responder,
    SeenRequest,
    error,
    event,
    notification,
    priming,
    result,
    serve_http,
    server_request,
)
from transports.complaints import BURST, Complaints
from transports.errors import HttpRPCError, StreamCut
from transports.http.inflight import InFlight
from transports.http.legacy_streams import (
    MIN_REOPEN_DELAY,
    RESUME_ATTEMPTS,
    PushReader,
    PushStream,
)
from transports.http.params import HttpParams
from transports.http.transport import HttpTransport, open_http_transport
from transports.read_pace import ReadPace

LIMIT = 10
LEGACY = {"MCP-Protocol-Version": "2025-11-25"}


class Inbox:
    """The notifications a transport hands on, waited for by count."""

    def __init__(self) -> None:
        self.seen: list[Notification] = []
        self._grew = trio.Event()

    def __call__(self, msg: Notification) -> None:
        self.seen.append(msg)
        self._grew.set()
        self._grew = trio.Event()

    async def wait(self, count: int) -> list[Any]:
        while len(self.seen) < count:
            await self._grew.wait()
        return [json.loads(bytes(n.params)) if n.params else None for n in self.seen]


async def handshake(t: HttpTransport) -> None:
    """What Upstream does with a legacy server, up to a first request with the version."""
    t.reset_session()
    t.era = "legacy"
    await t.request("initialize", {"protocolVersion": "2025-11-25"}, cancellable=False)
    await t.notify("notifications/initialized", None, headers=LEGACY)
    await t.request("tools/list", None, headers=LEGACY)


async def answer(req: SeenRequest, respond: Responder) -> None:
    await respond.json(result(req.rpc_id, {"tools": []}))


def gets(requests: list[SeenRequest]) -> list[SeenRequest]:
    return [r for r in requests if r.method == "GET"]


# -- the server-push stream --


def test_a_pushed_response_is_kept_once_and_only_for_a_request_in_flight() -> None:
    pushed = InFlight("old")
    first, second = Response(7, Raw(b'{"n":1}')), Response(7, Raw(b'{"n":2}'))
    assert not pushed.keep(first)  # nothing of ours waits for id 7
    waiting = pushed.expect(7)
    assert pushed.keep(first)
    assert waiting.cancel_called  # the request has its answer: it waits no more
    assert not pushed.keep(second)
    assert pushed.settled(7) is first
    pushed.drop(7)
    assert pushed.kept(7) is None
    assert not pushed.keep(second)


async def test_push_stream_is_opened_with_the_session_headers_on_its_own_connection() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method != "GET":
            return await answer(req, respond)
        await respond.sse_start()
        await respond.send(event(notification("notifications/tools/list_changed")))
        await respond.wait_disconnect()

    inbox = Inbox()
    server = LegacySession(handler)
    with trio.fail_after(LIMIT):
        async with (
            serve_http(server) as srv,
            open_http_transport(
                "old",
                srv.url(),
                HttpParams(headers={"Authorization": "Bearer s3cret"}, pool_size=1),
                on_notification=inbox,
            ) as t,
            trio.open_nursery() as nursery,
        ):
            await handshake(t)
            nursery.start_soon(t.listen)
            await inbox.wait(1)
            # The stream holds a connection of its own: calls still have the pool's one.
            await t.request("tools/list", None, headers=LEGACY)
            nursery.cancel_scope.cancel()

    assert [n.method for n in inbox.seen] == ["notifications/tools/list_changed"]
    (get,) = gets(srv.requests)
    assert (get.target, get.body) == ("/mcp", b"")
    assert get.header("accept") == "text/event-stream"
    assert get.header("mcp-session-id") == "session-1"
    assert get.header("mcp-protocol-version") == "2025-11-25"
    assert get.header("authorization") == "Bearer s3cret"
    assert get.header("last-event-id") is None
    assert get.header("content-type") is None
    posts = [r for r in srv.requests if r.method == "POST"]
    assert get.connection not in {r.connection for r in posts}
    assert len({r.connection for r in posts}) == 1


@pytest.mark.parametrize("status", [405, 400, 406])
async def test_a_server_without_a_push_stream_is_not_asked_again(status: int) -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "GET":
            await respond.reply(status, "Method Not Allowed", {"Allow": "POST, DELETE"})
        else:
            await answer(req, respond)

    with trio.fail_after(LIMIT):
        async with (
            serve_http(LegacySession(handler)) as srv,
            open_http_transport("old", srv.url()) as t,
        ):
            await handshake(t)
            await t.listen()  # returns by itself: nothing to hold
            await t.request("tools/list", None, headers=LEGACY)
    assert srv.methods().count("GET") == 1


async def test_listen_does_nothing_for_a_modern_server() -> None:
    with trio.fail_after(LIMIT):
        async with serve_http(answer) as srv, open_http_transport("new", srv.url()) as t:
            t.era = "modern"
            await t.listen()
    assert srv.requests == []


@pytest.mark.parametrize("how", ["cut", "end"])
async def test_a_dropped_push_stream_is_opened_again_where_it_left_off(how: str) -> None:
    streams: list[SeenRequest] = []

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method != "GET":
            return await answer(req, respond)
        streams.append(req)
        await respond.sse_start()
        if len(streams) == 1:
            await respond.send(priming("p1", retry=10))
            note = notification("notifications/message", {"level": "info", "data": "one"})
            await respond.send(event(note, id="e1"))
            await (respond.cut() if how == "cut" else respond.end())
        else:
            note = notification("notifications/message", {"level": "info", "data": "two"})
            await respond.send(event(note, id="e2"))
            await respond.wait_disconnect()

    inbox = Inbox()
    with trio.fail_after(LIMIT):
        async with (
            serve_http(LegacySession(handler)) as srv,
            open_http_transport("old", srv.url(), on_notification=inbox) as t,
            trio.open_nursery() as nursery,
        ):
            await handshake(t)
            nursery.start_soon(t.listen)
            notes = await inbox.wait(2)
            nursery.cancel_scope.cancel()

    assert [n["data"] for n in notes] == ["one", "two"]
    first, second = streams
    assert first.header("last-event-id") is None
    assert second.header("last-event-id") == "e1"
    assert second.header("mcp-session-id") == "session-1"


async def test_a_push_stream_refused_for_now_is_asked_for_again() -> None:
    # 409 is what the TS SDK says while it still holds a stream we gave up on.
    streams: list[SeenRequest] = []

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method != "GET":
            return await answer(req, respond)
        streams.append(req)
        if len(streams) == 1:
            await respond.sse(priming("p1", retry=10))  # and the stream ends at once
        elif len(streams) == 2:
            await respond.json(error(None, -32000, "Conflict: Only one SSE stream"), 409)
        else:
            await respond.sse_start()
            await respond.send(event(notification("notifications/tools/list_changed")))
            await respond.wait_disconnect()

    inbox = Inbox()
    with trio.fail_after(LIMIT):
        async with (
            serve_http(LegacySession(handler)) as srv,
            open_http_transport("old", srv.url(), on_notification=inbox) as t,
            trio.open_nursery() as nursery,
        ):
            await handshake(t)
            nursery.start_soon(t.listen)
            await inbox.wait(1)
            nursery.cancel_scope.cancel()
    assert [s.header("last-event-id") for s in streams] == [None, "p1", "p1"]


async def test_a_server_asking_to_be_polled_without_pause_is_not(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Each stream brings a message and `retry: 0`, and ends at once.
    opened: list[float] = []

    async def open_stream(last_event_id: str | None, reader: PushReader) -> None:
        opened.append(trio.current_time())
        reader.opened = True
        reader.messages = 1
        reader.decoder.feed(b"retry: 0\ndata: {}\n\n")
        await trio.lowlevel.checkpoint()

    async def no_session() -> None:
        raise AssertionError("the session is not gone")

    stream = PushStream(
        "old",
        open_stream,
        lambda: PushReader(
            "old",
            1024,
            None,
            answer_nothing,
            complain=Complaints().admit,
            pace=ReadPace("old", 1024),
        ),
        lambda: len(opened) >= 50,
        no_session,
        Complaints().admit,
    )
    with trio.fail_after(3600):
        await stream.hold()
    gaps = [later - earlier for earlier, later in itertools.pairwise(opened)]
    assert min(gaps) == pytest.approx(MIN_REOPEN_DELAY), gaps


async def answer_nothing(req: Any) -> None:
    raise AssertionError("no request is sent")


async def test_requests_on_the_push_stream_are_answered_by_post() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method != "GET":
            return await answer(req, respond)
        await respond.sse_start()
        await respond.send(event(server_request("p-1", "ping")))
        await respond.send(event(server_request(7, "roots/list")))
        await respond.wait_disconnect()

    server = LegacySession(handler)
    with trio.fail_after(LIMIT):
        async with (
            serve_http(server) as srv,
            open_http_transport("old", srv.url()) as t,
            trio.open_nursery() as nursery,
        ):
            await handshake(t)
            nursery.start_soon(t.listen)
            while len(server.answers) < 2:
                await server.answered.wait()
            nursery.cancel_scope.cancel()

    ping, roots = server.answers
    assert ping == {"jsonrpc": "2.0", "id": "p-1", "result": {}}
    assert roots["id"] == 7 and roots["error"]["code"] == METHOD_NOT_FOUND
    for post in [r for r in srv.requests if r.method == "POST" and r.rpc_method is None]:
        assert post.header("mcp-session-id") == "session-1"
        assert post.header("mcp-protocol-version") == "2025-11-25"


async def test_the_push_stream_ends_with_the_transport() -> None:
    opened = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method != "GET":
            return await answer(req, respond)
        await respond.sse_start()
        opened.set()
        await respond.wait_disconnect()

    server = LegacySession(handler)
    with trio.fail_after(LIMIT):
        # The transport is left first: that must end the listener, or the nursery
        # around it would wait forever.
        async with (
            serve_http(server) as srv,
            trio.open_nursery() as nursery,
            open_http_transport("old", srv.url()) as t,
        ):
            await handshake(t)
            await nursery.start(t.listen)
            await opened.wait()
    assert srv.methods()[-1] == "DELETE"
    assert server.ended == ["session-1"]


async def test_the_push_stream_waits_for_a_new_session_when_the_server_forgot_its_own() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method != "GET":
            return await answer(req, respond)
        await respond.sse_start()
        await respond.send(event(notification("notifications/tools/list_changed")))
        await respond.wait_disconnect()

    server = LegacySession(handler)
    refused = trio.Event()

    async def forgetful(req: SeenRequest, respond: Responder) -> None:
        if req.method == "GET" and req.header("mcp-session-id") == "session-1":
            await respond.json(error(None, -32001, "Session not found"), 404)
            refused.set()
        else:
            await server(req, respond)

    inbox = Inbox()
    with trio.fail_after(LIMIT):
        async with (
            serve_http(forgetful) as srv,
            open_http_transport("old", srv.url(), on_notification=inbox) as t,
            trio.open_nursery() as nursery,
        ):
            await handshake(t)
            nursery.start_soon(t.listen)
            await refused.wait()
            await handshake(t)  # a call found out, and started a new session
            await inbox.wait(1)
            nursery.cancel_scope.cancel()
    # No GET for a session known to be gone: the next one waited for the new session.
    assert [g.header("mcp-session-id") for g in gets(srv.requests)] == ["session-1", "session-2"]


async def test_what_a_server_floods_its_streams_with_is_warned_about_within_one_budget(
    caplog: pytest.LogCaptureFixture, mock_clock: trio.testing.MockClock
) -> None:
    # The clock stands still until the test moves it: what is logged depends on the
    # count of events alone (the budget is a burst, then one a second).
    flood = 300
    stray = event(result(123456, {}))
    bad = "data: {not json\n\n"
    marker = event(notification("notifications/tools/list_changed"))
    more = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "GET":
            await respond.sse_start()
            await respond.send((stray + bad) * flood + marker)
            await more.wait()
            await respond.send(bad + marker)
            await respond.wait_disconnect()
        elif req.rpc_method == "tools/call":
            # The call's own stream, in the same budget.
            await respond.sse(stray, event(result(req.rpc_id, {})))
        else:
            await answer(req, respond)

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]

    inbox = Inbox()
    with caplog.at_level(logging.WARNING, "mcpd.http"):
        async with (
            serve_http(LegacySession(handler)) as srv,
            open_http_transport("old", srv.url(), on_notification=inbox) as t,
            trio.open_nursery() as nursery,
        ):
            await handshake(t)
            nursery.start_soon(t.listen)
            await inbox.wait(1)
            await t.request("tools/call", {"name": "x"}, headers=LEGACY)
            burst = warnings()
            mock_clock.jump(1.0)
            more.set()
            await inbox.wait(2)
            nursery.cancel_scope.cancel()
    assert len(burst) == BURST
    assert "ignored a response for id 123456 on the server-push stream" in burst[0]
    assert "invalid JSON-RPC in the server-push stream" in burst[1]
    [after] = warnings()[BURST:]
    held = 2 * flood + 1 - BURST
    assert after.startswith("old: invalid JSON-RPC in the server-push stream")
    assert after.endswith(f"({held} more like this not logged)")


# -- resuming a call's event stream --


def resumable_call(how: str) -> tuple[list[Any], Any]:
    """A server whose tools/call stream ends (``how``: cut or end) after two events
    with ids, the second a progress notification; GET resumes it with the answer."""
    call_ids: list[Any] = []
    progress = notification("notifications/progress", {"progressToken": "t", "progress": 1})

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "POST" and req.rpc_method == "tools/call":
            call_ids.append(req.rpc_id)
            await respond.sse_start()
            await respond.send(priming("c1", retry=10))
            await respond.send(event(progress, id="c2"))
            await (respond.cut() if how == "cut" else respond.end())
        elif req.method == "GET":
            done = result(call_ids[0], {"content": [{"type": "text", "text": "done"}]})
            await respond.sse(event(done, id="c3"))
        else:
            await answer(req, respond)

    return call_ids, handler


@pytest.mark.parametrize("how", ["cut", "end"])
async def test_a_legacy_calls_cut_stream_is_resumed_with_its_last_event_id(how: str) -> None:
    call_ids, handler = resumable_call(how)
    inbox = Inbox()
    with trio.fail_after(LIMIT):
        async with (
            serve_http(LegacySession(handler)) as srv,
            open_http_transport("old", srv.url(), on_notification=inbox) as t,
        ):
            await handshake(t)
            raw = await t.request("tools/call", {"name": "slow"}, headers=LEGACY)
    assert json.loads(bytes(raw)) == {"content": [{"type": "text", "text": "done"}]}
    assert [n.method for n in inbox.seen] == ["notifications/progress"]  # delivered once
    assert len(call_ids) == 1  # the request itself was never sent again
    assert srv.methods()[-3:] == ["tools/call", "GET", "DELETE"]
    (get,) = gets(srv.requests)
    assert get.header("last-event-id") == "c2"
    assert get.header("accept") == "text/event-stream"
    assert get.header("mcp-session-id") == "session-1"
    assert get.header("mcp-protocol-version") == "2025-11-25"


async def test_a_calls_answer_on_the_push_stream_is_taken_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Some servers resume a cut stream on the push stream. The first answer there is the
    # call's; one more for it is a response nobody waits for, said and read as one.
    called, cut = trio.Event(), trio.Event()
    call_ids: list[Any] = []

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "POST" and req.rpc_method == "tools/call":
            call_ids.append(req.rpc_id)
            called.set()
            await respond.sse_start()
            await respond.send(priming("c1", retry=10))
            await cut.wait()
            await respond.cut()
        elif req.method == "GET":
            await respond.sse_start()
            await called.wait()
            answers = [result(call_ids[0], {"said": said}) for said in ("first", "again")]
            marker = notification("notifications/tools/list_changed")
            await respond.send("".join(event(m) for m in [*answers, marker]))
            await respond.wait_disconnect()
        else:
            await answer(req, respond)

    inbox = Inbox()
    raw: list[bytes] = []
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.http"):
        async with (
            serve_http(LegacySession(handler)) as srv,
            open_http_transport("old", srv.url(), on_notification=inbox) as t,
            trio.open_nursery() as nursery,
        ):
            await handshake(t)
            nursery.start_soon(t.listen)

            async def call() -> None:
                raw.append(bytes(await t.request("tools/call", {"name": "x"}, headers=LEGACY)))
                nursery.cancel_scope.cancel()

            nursery.start_soon(call)
            await inbox.wait(1)  # both answers were read before it
            cut.set()
    assert [json.loads(r) for r in raw] == [{"said": "first"}]
    said = [r.getMessage() for r in caplog.records]
    assert f"old: ignored a response for id {call_ids[0]} on the server-push stream" in said
    assert len(gets(srv.requests)) == 1  # taken from there: no GET to resume it


async def test_an_error_under_an_id_that_is_none_on_the_push_stream_is_skipped_unread(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad = b'{"jsonrpc":"2.0","id":true,"error":{"code":-1,"message":"no","data":[[],[]]}}'

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method != "GET":
            return await answer(req, respond)
        await respond.sse_start()
        await respond.send(b"data: " + bad + b"\n\n")
        await respond.send(event(notification("notifications/tools/list_changed")))
        await respond.wait_disconnect()

    inbox = Inbox()
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.http"):
        async with (
            serve_http(LegacySession(handler)) as srv,
            open_http_transport("old", srv.url(), on_notification=inbox) as t,
            trio.open_nursery() as nursery,
        ):
            await handshake(t)
            nursery.start_soon(t.listen)
            await inbox.wait(1)
            nursery.cancel_scope.cancel()
    said = [r.getMessage() for r in caplog.records]
    assert said == ["old: invalid JSON-RPC in the server-push stream: Invalid response: bad id"]


async def test_a_resumed_stream_may_carry_an_error_response() -> None:
    call_ids: list[Any] = []

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "GET":
            await respond.sse(event(error(call_ids[0], -32602, "bad arguments")))
        elif req.rpc_method == "tools/call":
            call_ids.append(req.rpc_id)
            await respond.sse(priming("c1", retry=10))
        else:
            await answer(req, respond)

    with trio.fail_after(LIMIT):
        async with (
            serve_http(LegacySession(handler)) as srv,
            open_http_transport("old", srv.url()) as t,
        ):
            await handshake(t)
            with pytest.raises(HttpRPCError, match="bad arguments"):
                await t.request("tools/call", {"name": "x"}, headers=LEGACY)
    assert srv.methods().count("GET") == 1


async def test_no_resumption_without_event_ids() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "tools/call":
            await respond.sse(event(notification("notifications/progress", {})))
        else:
            await answer(req, respond)

    with trio.fail_after(LIMIT):
        async with (
            serve_http(LegacySession(handler)) as srv,
            open_http_transport("old", srv.url()) as t,
        ):
            await handshake(t)
            with pytest.raises(StreamCut, match="ended before its response"):
                await t.request("tools/call", {"name": "x"}, headers=LEGACY)
    assert "GET" not in srv.methods()


async def test_no_resumption_for_a_modern_server() -> None:
    _, handler = resumable_call("end")
    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv, open_http_transport("new", srv.url()) as t:
            t.era = "modern"
            with pytest.raises(StreamCut, match="ended before its response"):
                await t.request("tools/call", {"name": "x"})
    assert srv.methods() == ["tools/call"]


async def test_a_refused_resumption_is_a_stream_cut() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "GET":
            await respond.reply(405, "Method Not Allowed")
        elif req.rpc_method == "tools/call":
            await respond.sse(priming("c1", retry=10))
        else:
            await answer(req, respond)

    with trio.fail_after(LIMIT):
        async with (
            serve_http(LegacySession(handler)) as srv,
            open_http_transport("old", srv.url()) as t,
        ):
            await handshake(t)
            with pytest.raises(StreamCut, match="resuming it failed: HTTP 405"):
                await t.request("tools/call", {"name": "x"}, headers=LEGACY)
    assert srv.methods().count("GET") == 1
    assert srv.methods().count("tools/call") == 1


async def test_resumption_gives_up_after_a_few_attempts() -> None:
    streams: list[SeenRequest] = []

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "GET":
            streams.append(req)
            await respond.sse(priming(f"g{len(streams)}"))  # and again no response
        elif req.rpc_method == "tools/call":
            await respond.sse(priming("c1", retry=10))
        else:
            await answer(req, respond)

    with trio.fail_after(LIMIT):
        async with (
            serve_http(LegacySession(handler)) as srv,
            open_http_transport("old", srv.url()) as t,
        ):
            await handshake(t)
            with pytest.raises(StreamCut, match="resuming it failed"):
                await t.request("tools/call", {"name": "x"}, headers=LEGACY)
    # Each attempt resumes from the newest id it got.
    assert [s.header("last-event-id") for s in streams] == ["c1", "g1", "g2"][:RESUME_ATTEMPTS]
    assert srv.methods().count("tools/call") == 1


async def test_a_push_stream_in_an_encoding_mcpd_did_not_ask_for_is_refused_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method != "GET":
            return await answer(req, respond)
        headers = {"Content-Type": "text/event-stream", "Content-Encoding": "br"}
        await respond.reply(200, b"\x8b\x00\x80", headers)

    with trio.fail_after(LIMIT), caplog.at_level(logging.DEBUG, logger="mcpd.http"):
        async with (
            serve_http(LegacySession(handler)) as srv,
            open_http_transport("old", srv.url()) as t,
        ):
            await handshake(t)
            await t.listen()  # returns by itself: no stream to hold
    said = [r.getMessage() for r in caplog.records]
    assert "old: no server-push stream: old: the server sent a br-encoded body, which mcpd " in (
        "\n".join(said)
    ), said
    assert srv.methods().count("GET") == 1


class Said(logging.Handler):
    """The journal's events, and ``held`` set once it says a server is held back."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []
        self.held = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        said = getattr(record, "mcpd_event", None)
        if said is not None and record.levelno >= logging.WARNING:
            self.events.append(said)
        if said == "held_back":
            self.held.set()


async def test_an_event_cut_for_its_size_on_the_push_stream_is_said_and_paid_for() -> None:
    # Its data lines, fewer than are read free, never end in an event: nothing of them
    # is charged until it is cut, and then every line, so that the next stream waits
    # for the server's pace.
    most = 64 * 1024

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method != "GET":
            return await answer(req, respond)
        await respond.sse_start()
        await respond.send((b"data: " + b"x" * 93 + b"\n") * (2 * most // 100))
        await respond.wait_disconnect()

    said = Said()
    logger = logging.getLogger("mcpd")
    logger.addHandler(said)
    try:
        with trio.fail_after(LIMIT):
            async with (
                serve_http(LegacySession(handler)) as srv,
                open_http_transport(
                    "old", srv.url(), HttpParams(max_body=most, read_budget=10)
                ) as t,
                trio.open_nursery() as nursery,
            ):
                await handshake(t)
                nursery.start_soon(t.listen)
                await said.held.wait()
                nursery.cancel_scope.cancel()
    finally:
        logger.removeHandler(said)
    assert said.events[0] == "event_too_large"
