"""The HTTP+SSE transport (MCP 2024-11-05) against a server of the old kind."""

from __future__ import annotations

import json
import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
import trustme

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.messages import Notification
from protocol.jsonrpc.reply_faults import MalformedReply
from tests.support.http_servers.legacy_sse import (
    LegacySSEServer,
    Message,
    OnMessage,
    Session,
    answer,
    serve_legacy_sse,
    sse_event,
)
from tests.support.http_servers.serving import Responder, SeenRequest, serve_http
from transports.base import MAX_ANSWERING
from transports.complaints import BURST
from transports.errors import (
    AuthError,
    ServerCancelled,
    StreamCut,
    TransportClosed,
    TransportError,
    UnexpectedReply,
)
from transports.http.params import HttpParams
from transports.sse.transport import LegacySSETransport, open_legacy_sse_transport

LIMIT = 10


def reply(msg: Message, value: Any) -> Message:
    return {"jsonrpc": "2.0", "id": msg["id"], "result": value}


def note(method: str, params: Any) -> Message:
    return {"jsonrpc": "2.0", "method": method, "params": params}


async def call(t: LegacySSETransport, name: str, **arguments: Any) -> Any:
    raw = await t.request("tools/call", {"name": name, "arguments": arguments})
    return json.loads(bytes(raw))


@asynccontextmanager
async def connected(
    on_message: OnMessage = answer, *, accept_after: bool = False, **kw: Any
) -> AsyncIterator[tuple[LegacySSEServer, LegacySSETransport]]:
    async with (
        serve_legacy_sse(on_message, accept_after=accept_after) as server,
        open_legacy_sse_transport("old", server.url(), **kw) as t,
    ):
        yield server, t


def posts(server: LegacySSEServer) -> list[SeenRequest]:
    return [r for r in server.requests if r.method == "POST"]


class Inbox:
    """Notifications as the transport hands them on, waited for by count."""

    def __init__(self) -> None:
        self.seen: list[Notification] = []
        self._grew = trio.Event()

    def __call__(self, msg: Notification) -> None:
        self.seen.append(msg)
        self._grew.set()
        self._grew = trio.Event()

    async def wait(self, count: int) -> None:
        while len(self.seen) < count:
            await self._grew.wait()


# -- the endpoint --


async def test_relative_endpoint_then_messages_go_there_with_the_headers() -> None:
    headers = {"Authorization": "Bearer t0k", "X-Team": "a"}
    with trio.fail_after(LIMIT):
        async with (
            serve_legacy_sse() as server,
            open_legacy_sse_transport("old", server.url(), HttpParams(headers=headers)) as t,
        ):
            assert t.endpoint == server.url("/messages?session_id=s1")
            init = await t.request("initialize", {"protocolVersion": "2024-11-05"})
            assert json.loads(bytes(init))["protocolVersion"] == "2024-11-05"
            await t.notify("notifications/initialized", None)
            assert await call(t, "echo", text="hi") == {"content": [{"type": "text", "text": "hi"}]}

    get, *sent = server.requests
    assert (get.method, get.target, get.header("accept")) == ("GET", "/sse", "text/event-stream")
    assert [r.rpc_method for r in sent] == ["initialize", "notifications/initialized", "tools/call"]
    for req in [get, *sent]:
        assert req.header("authorization") == "Bearer t0k"
        assert req.header("x-team") == "a"
    for req in sent:
        assert req.target == "/messages?session_id=s1"
        assert req.header("content-type") == "application/json"
        assert req.header("accept") == "application/json, text/event-stream"
    # The ids are the transport's own, one per request.
    assert [r.rpc_id for r in sent] == [1, None, 2]
    # Leaving the transport ends the stream: the server sees its client go.
    assert server.session.disconnected.is_set()


async def test_absolute_endpoint_on_the_same_origin() -> None:
    with trio.fail_after(LIMIT):
        async with (
            serve_legacy_sse(
                endpoint=lambda sid, http: http.url(f"/messages?session_id={sid}")
            ) as server,
            open_legacy_sse_transport("old", server.url()) as t,
        ):
            assert await call(t, "echo", text="abs") == {
                "content": [{"type": "text", "text": "abs"}]
            }
    assert posts(server)[0].target == "/messages?session_id=s1"


@pytest.mark.parametrize(
    "where",
    [
        lambda sid, http: f"http://evil.example/messages?session_id={sid}",
        lambda sid, http: f"http://{http.host}:{http.port + 1}/messages?session_id={sid}",
        lambda sid, http: f"https://{http.host}:{http.port}/messages?session_id={sid}",
        lambda sid, http: f"//evil.example/messages?session_id={sid}",
    ],
    ids=["other-host", "other-port", "other-scheme", "scheme-relative"],
)
async def test_an_endpoint_on_another_origin_is_refused(where: Any) -> None:
    with trio.fail_after(LIMIT):
        async with serve_legacy_sse(endpoint=where) as server:
            with pytest.raises(UnexpectedReply) as info:
                async with open_legacy_sse_transport(
                    "old", server.url(), HttpParams(headers={"Authorization": "Bearer secret"})
                ):
                    pytest.fail("the transport opened")
            await server.session.disconnected.wait()
    assert "refused the endpoint" in info.value.reason
    assert "not on the event stream's origin" in info.value.reason
    assert [r.method for r in server.requests] == ["GET"]


async def test_no_endpoint_event_in_time_is_an_error() -> None:
    async def silent(req: SeenRequest, respond: Responder) -> None:
        await respond.sse_start()
        await respond.send(": waiting\n\n")
        await respond.send(sse_event('{"jsonrpc":"2.0","method":"notifications/x"}'))
        await respond.wait_disconnect()

    with trio.fail_after(LIMIT):
        async with serve_http(silent) as srv:
            start = trio.current_time()
            with pytest.raises(TransportError) as info:
                async with open_legacy_sse_transport(
                    "old", srv.url("/sse"), HttpParams(connect_timeout=0.3)
                ):
                    pytest.fail("the transport opened")
            took = trio.current_time() - start
    assert info.value.reason == (
        f'old: the event stream at "{srv.url("/sse")}" named no endpoint within 0.3 s'
    )
    assert 0.3 <= took < 2


@pytest.mark.parametrize(
    ("sent", "opens"),
    [
        (b"", False),
        (b": hello\n\n", False),
        (b"event: endpoint\ndata: /messages?s=1", False),
        (b"event: endpoint\ndata: /messages?s=1\n\n", True),
    ],
    ids=["nothing", "a comment", "an endpoint without its blank line", "an endpoint"],
)
async def test_a_stream_that_ends_at_once(sent: bytes, opens: bool) -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.sse(sent)

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            if opens:
                # The endpoint counts; the stream's end closes the transport at once.
                async with open_legacy_sse_transport("old", srv.url("/sse")) as t:
                    await t.closed.wait()
                    assert t.endpoint == srv.url("/messages?s=1")
                assert isinstance(t.error, TransportClosed)
                assert t.error.reason == "old: the server ended the event stream"
            else:
                with pytest.raises(TransportClosed) as info:
                    async with open_legacy_sse_transport("old", srv.url("/sse")):
                        pytest.fail("the transport opened")
                assert info.value.reason == (
                    "old: the server ended the event stream before naming an endpoint"
                )


@pytest.mark.parametrize(
    ("status", "content_type", "expected"),
    [
        (200, "application/json", 'GET answered HTTP 200 with "application/json"'),
        (404, "text/plain", "HTTP 404 to GET without a JSON-RPC error"),
        (405, "text/plain", "HTTP 405 to GET without a JSON-RPC error"),
    ],
)
async def test_a_get_that_opens_no_stream(status: int, content_type: str, expected: str) -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.reply(status, "nope", {"Content-Type": content_type})

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            with pytest.raises(UnexpectedReply) as info:
                async with open_legacy_sse_transport("old", srv.url("/sse")):
                    pytest.fail("the transport opened")
    assert expected in info.value.reason
    assert info.value.status == status


async def test_401_on_the_stream_is_an_auth_error_with_the_challenge() -> None:
    challenge = 'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth"'

    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.reply(401, "", {"WWW-Authenticate": challenge})

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            with pytest.raises(AuthError) as info:
                async with open_legacy_sse_transport("old", srv.url("/sse")):
                    pytest.fail("the transport opened")
    assert info.value.status == 401
    assert info.value.challenge == challenge


async def test_401_on_a_post_is_an_auth_error_and_the_stream_stays() -> None:
    refuse = True
    inner = LegacySSEServer()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "POST" and refuse:
            await respond.reply(401, "", {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        else:
            await inner(req, respond)

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery, serve_http(handler) as srv:
            inner.http, inner._nursery = srv, nursery
            async with open_legacy_sse_transport("old", srv.url("/sse")) as t:
                with pytest.raises(AuthError) as info:
                    await t.request("tools/list", None)
                assert info.value.challenge == 'Bearer error="invalid_token"'
                assert not t.closed.is_set()
                refuse = False
                assert json.loads(bytes(await t.request("ping", None))) == {}
            nursery.cancel_scope.cancel()


async def test_the_stream_follows_a_redirect_on_its_origin_only() -> None:
    inner = LegacySSEServer()
    elsewhere = "http://other.example/sse"

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.target == "/old-sse":
            await respond.reply(307, "", {"Location": "/sse"})
        elif req.target == "/away":
            await respond.reply(302, "", {"Location": elsewhere})
        else:
            await inner(req, respond)

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery, serve_http(handler) as srv:
            inner.http, inner._nursery = srv, nursery
            async with open_legacy_sse_transport("old", srv.url("/old-sse")) as t:
                assert t.endpoint == srv.url("/messages?session_id=s1")
                assert json.loads(bytes(await t.request("ping", None))) == {}
            with pytest.raises(UnexpectedReply) as info:
                async with open_legacy_sse_transport("old", srv.url("/away")):
                    pytest.fail("the transport opened")
            nursery.cancel_scope.cancel()
    assert (
        info.value.reason
        == f'old: refused an HTTP 302 redirect of the event stream to "{elsewhere}"'
    )
    assert [r.target for r in srv.requests if r.method == "GET"] == ["/old-sse", "/sse", "/away"]


async def test_tls_with_a_test_ca(tmp_path: Any) -> None:
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))

    with trio.fail_after(LIMIT):
        async with serve_legacy_sse(ssl_context=server_ctx) as server:
            url = server.url()
            assert url.startswith("https://")
            async with open_legacy_sse_transport("old", url, HttpParams(ca_file=str(ca_file))) as t:
                assert t.endpoint == server.url("/messages?session_id=s1")
                assert await call(t, "echo", text="tls") == {
                    "content": [{"type": "text", "text": "tls"}]
                }
            with pytest.raises(TransportError, match="TLS failure") as info:
                async with open_legacy_sse_transport("old", url):
                    pytest.fail("the transport opened")
            assert "certificate" in info.value.reason.lower()
            async with open_legacy_sse_transport("old", url, HttpParams(tls_verify=False)) as t:
                assert json.loads(bytes(await t.request("ping", None))) == {}


# -- messages on the stream --


async def test_notifications_before_the_response_arrive_first() -> None:
    async def server_side(session: Session, msg: Message) -> None:
        if msg.get("method") != "tools/call":
            return await answer(session, msg)
        token = msg["params"]["_meta"]["progressToken"]
        for step in (1, 2):
            params = {"progressToken": token, "progress": step, "total": 2}
            await session.send(note("notifications/progress", params))
        await session.send(reply(msg, {"content": []}))

    events: list[Any] = []

    def seen(msg: Notification) -> None:
        events.append(json.loads(bytes(msg.params)) if msg.params else None)

    with trio.fail_after(LIMIT):
        async with connected(server_side, on_notification=seen) as (_, t):
            params = {"name": "work", "arguments": {}, "_meta": {"progressToken": "p"}}
            events.append(json.loads(bytes(await t.request("tools/call", params))))
    assert events == [
        {"progressToken": "p", "progress": 1, "total": 2},
        {"progressToken": "p", "progress": 2, "total": 2},
        {"content": []},
    ]


async def test_responses_out_of_order_reach_their_requests() -> None:
    release = trio.Event()

    async def server_side(session: Session, msg: Message) -> None:
        if msg.get("method") == "tools/call" and msg["params"]["name"] == "slow":
            await release.wait()
            await session.send(reply(msg, {"which": "slow"}))
        else:
            await answer(session, msg)

    done: list[Any] = []

    async def slow(t: LegacySSETransport) -> None:
        done.append(await call(t, "slow"))

    with trio.fail_after(LIMIT):
        async with connected(server_side) as (server, t), trio.open_nursery() as nursery:
            nursery.start_soon(slow, t)
            await server.session.wait_for(lambda m: m.get("params", {}).get("name") == "slow")
            done.append(await call(t, "echo", text="fast"))
            release.set()
    assert done == [{"content": [{"type": "text", "text": "fast"}]}, {"which": "slow"}]


async def test_a_response_that_comes_before_the_post_is_accepted() -> None:
    # Some servers write the response on the stream before they answer the POST.
    with trio.fail_after(LIMIT):
        async with connected(accept_after=True) as (_, t):
            for n in range(3):
                got = await call(t, "echo", text=str(n))
                assert got == {"content": [{"type": "text", "text": str(n)}]}


PRETTY_RESULT = {"content": [{"type": "text", "text": "line one"}], "isError": False}


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
async def test_pretty_printed_json_over_several_data_lines(eol: str) -> None:
    async def server_side(session: Session, msg: Message) -> None:
        if msg.get("method") != "tools/call":
            return await answer(session, msg)
        await session.send(
            {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}},
            indent=4,
            eol=eol,
        )
        await session.send(reply(msg, PRETTY_RESULT), indent=2, eol=eol)

    inbox = Inbox()
    with trio.fail_after(LIMIT):
        async with connected(server_side, on_notification=inbox) as (_, t):
            raw = await t.request("tools/call", {"name": "x"})
    # Compacted where it came in: one line, nothing else changed.
    assert bytes(raw) == b'{"content":[{"type":"text","text":"line one"}],"isError":false}'
    assert [bytes(n.params) for n in inbox.seen if n.params] == [b'{"level":"info"}']


async def test_data_split_anywhere_between_tokens_and_chunks() -> None:
    text = '{"jsonrpc":"2.0",\n"id":ID,\n"result":\n{"a":\n[1,\n2.50]}}'

    async def server_side(session: Session, msg: Message) -> None:
        if msg.get("method") != "tools/call":
            return await answer(session, msg)
        event = sse_event(text.replace("ID", str(msg["id"])), eol="\r\n")
        # The event arrives in pieces, one of them between CR and LF.
        for piece in (event[:7], event[7:19], event[19:20], event[20:]):
            await session.send_raw(piece)

    with trio.fail_after(LIMIT):
        async with connected(server_side) as (_, t):
            raw = await t.request("tools/call", {"name": "x"})
    assert bytes(raw) == b'{"a":[1,2.50]}'


# Strings that must cross unchanged: raw U+2028/U+2029 (line breaks to JavaScript, not
# to JSON), escaped newlines and escaped U+2028, a solidus escape, non-ASCII.
TRICKY = '{"text":"a\u2028b\u2029c","esc":"x\\ny\\r\\u2028z","sol":"\\/","u":"caf\u00e9 \u2603"}'


@pytest.mark.parametrize("pretty", [False, True], ids=["one-line", "pretty"])
async def test_strings_pass_byte_exact(pretty: bool) -> None:
    async def server_side(session: Session, msg: Message) -> None:
        if msg.get("method") != "tools/call":
            return await answer(session, msg)
        body = TRICKY.replace('","', '",\n  "') if pretty else TRICKY
        assert ("\n" in body) == pretty
        data = f'{{"jsonrpc":"2.0","id":{msg["id"]},"result":{body}}}'
        await session.send_raw(sse_event(data))

    with trio.fail_after(LIMIT):
        async with connected(server_side) as (_, t):
            raw = bytes(await t.request("tools/call", {"name": "x"}))
    assert raw == TRICKY.encode()
    assert b"\n" not in raw and b"\r" not in raw
    decoded = json.loads(raw)
    assert decoded["text"] == "a\u2028b\u2029c"
    assert decoded["esc"] == "x\ny\r\u2028z"


async def test_a_bad_event_costs_only_itself(caplog: pytest.LogCaptureFixture) -> None:
    async def server_side(session: Session, msg: Message) -> None:
        if msg.get("method") != "tools/call":
            return await answer(session, msg)
        await session.send_raw(sse_event('{"jsonrpc":"2.0",\n"id":'))
        await session.send_raw(sse_event("not json"))
        await session.send(reply(msg, {"ok": True}))

    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.sse"):
        async with connected(server_side) as (_, t):
            assert await call(t, "x") == {"ok": True}
    skipped = [r.getMessage() for r in caplog.records if "skipped an event" in r.getMessage()]
    assert len(skipped) == 2


async def test_a_flood_of_bad_events_and_stray_responses_is_warned_about_within_a_budget(
    caplog: pytest.LogCaptureFixture, mock_clock: trio.testing.MockClock
) -> None:
    # The clock stands still until the test moves it: what is logged depends on the
    # count of events alone (the budget is a burst, then one a second).
    flood = 300
    bad = sse_event("not json")
    stray = sse_event(json.dumps(reply({"id": 424242}, {})))
    marker = sse_event(json.dumps(note("notifications/message", {"level": "info", "data": 1})))

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]

    inbox = Inbox()
    with caplog.at_level(logging.WARNING, "mcpd.sse"):
        async with connected(on_notification=inbox) as (server, _):
            await server.session.send_raw((bad + stray) * flood + marker)
            await inbox.wait(1)
            burst = warnings()
            mock_clock.jump(1.0)
            await server.session.send_raw(stray + marker)
            await inbox.wait(2)
    assert len(burst) == BURST
    assert burst[0].startswith("old: skipped an event that is not JSON-RPC")
    assert burst[1].startswith("old: dropped a response for id 424242")
    [after] = warnings()[BURST:]
    assert after.startswith("old: dropped a response for id 424242")
    assert after.endswith(f"({2 * flood - BURST} more like this not logged)")


async def test_the_servers_requests_are_answered_by_post() -> None:
    async def server_side(session: Session, msg: Message) -> None:
        if msg.get("method") != "tools/call":
            return await answer(session, msg)
        # It asks before it answers, and waits for both answers.
        await session.send({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
        await session.send({"jsonrpc": "2.0", "id": 7, "method": "roots/list"})
        pong = await session.wait_for(lambda m: m.get("id") == "srv-1" and "method" not in m)
        roots = await session.wait_for(lambda m: m.get("id") == 7 and "method" not in m)
        await session.send(reply(msg, {"pong": pong, "roots": roots}))

    with trio.fail_after(LIMIT):
        async with connected(server_side) as (server, t):
            got = await call(t, "x")
    assert got["pong"] == {"jsonrpc": "2.0", "id": "srv-1", "result": {}}
    assert got["roots"]["error"]["code"] == rpc.METHOD_NOT_FOUND
    assert got["roots"]["error"]["message"] == "mcpd does not support 'roots/list'"
    answers = [r for r in posts(server) if r.rpc_method is None]
    assert {r.target for r in answers} == {"/messages?session_id=s1"}


async def test_a_flood_of_requests_costs_a_bounded_number_of_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The server writes requests by the hundred and holds every answer's POST: only so
    # many answers are on their way at once, and the rest get none.
    flood = 500
    release = trio.Event()

    async def server_side(session: Session, msg: Message) -> None:
        if "method" not in msg:
            await release.wait()
        else:
            await answer(session, msg)

    pings = b"".join(
        sse_event(json.dumps({"jsonrpc": "2.0", "id": f"p{i}", "method": "ping"}))
        for i in range(flood)
    )
    marker = sse_event(json.dumps(note("notifications/message", {"level": "info", "data": 1})))
    inbox = Inbox()
    with trio.fail_after(LIMIT):
        async with connected(server_side, accept_after=True, on_notification=inbox) as (
            server,
            t,
        ):
            await server.session.send_raw(pings + marker)
            await inbox.wait(1)  # every ping was read before it
            await trio.testing.wait_all_tasks_blocked()
            release.set()
            assert json.loads(bytes(await t.request("ping", None))) == {}
            answers = [r for r in posts(server) if r.rpc_method is None]
    assert len(answers) <= MAX_ANSWERING + 8, len(answers)
    assert "asks faster than it takes the answers" in caplog.text


async def test_the_server_cancelling_a_request() -> None:
    async def server_side(session: Session, msg: Message) -> None:
        if msg.get("params", {}).get("name") != "x":
            return await answer(session, msg)
        params = {"requestId": msg["id"], "reason": "shutting down"}
        await session.send(note("notifications/cancelled", params))

    with trio.fail_after(LIMIT):
        async with connected(server_side) as (_, t):
            with pytest.raises(ServerCancelled, match="shutting down"):
                await call(t, "x")
            assert await call(t, "echo", text="on") == {"content": [{"type": "text", "text": "on"}]}


async def test_a_json_rpc_error_is_raised_as_one() -> None:
    with trio.fail_after(LIMIT):
        async with connected() as (_, t):
            with pytest.raises(rpc.RPCError) as info:
                await t.request("no/such", None)
            assert not isinstance(info.value, TransportError)
            assert (info.value.code, info.value.message) == (-32601, "no no/such")


def misanswered(how: str) -> OnMessage:
    """A server that answers the call to "x" with a response that cannot be taken, and
    everything else as it should."""

    async def server_side(session: Session, msg: Message) -> None:
        if msg.get("params", {}).get("name") != "x":
            return await answer(session, msg)
        rid = msg["id"]
        if how == "float id":
            await session.send({"jsonrpc": "2.0", "id": float(rid), "result": {}})
        elif how == "string id":
            await session.send({"jsonrpc": "2.0", "id": str(rid), "result": {}})
        else:
            error = {"code": -32000, "message": "no"}
            await session.send({"jsonrpc": "2.0", "id": rid, "result": {}, "error": error})

    return server_side


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("float id", "sent under the id 3.0 (not an integer) for request 3"),
        ("string id", 'sent under the id "3" (a string) for request 3'),
        ("both members", "both a result and an error (JSON-RPC allows one)"),
    ],
)
async def test_a_response_that_cannot_be_taken_fails_its_request_at_once(
    how: str, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Well inside a call's time limit: the answer came, it is only unusable.
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.sse"):
        async with connected(misanswered(how)) as (_, t):
            await call(t, "echo", text="first")
            await t.request("ping", None)
            with trio.fail_after(1.0), pytest.raises(MalformedReply) as info:
                await call(t, "x")
            assert info.value.reason == f"old: the reply was {why} and was dropped"
            assert await call(t, "echo", text="on") == {"content": [{"type": "text", "text": "on"}]}
    [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning == (
        f"{info.value.reason}; the request (id 3) it answered failed, the server keeps running"
    )


async def test_a_response_that_cannot_be_taken_in_a_posts_reply_fails_its_request() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "GET":
            await respond.sse_start()
            await respond.send(sse_event("/messages", event="endpoint"))
            await respond.wait_disconnect()
            return
        error = {"code": -32000, "message": "no"}
        await respond.json({"jsonrpc": "2.0", "id": req.rpc_id, "result": {}, "error": error})

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as http, open_legacy_sse_transport("old", http.url()) as t:
            with trio.fail_after(1.0), pytest.raises(MalformedReply, match="both a result"):
                await t.request("ping", None)
            assert t.error is None


# -- giving up, and the transport dying --


async def test_a_cancelled_request_tells_the_server_and_its_late_answer_is_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    held: list[Message] = []

    async def server_side(session: Session, msg: Message) -> None:
        if msg.get("params", {}).get("name") == "slow":
            held.append(msg)  # answered later, by the test
        else:
            await answer(session, msg)

    with trio.fail_after(LIMIT), caplog.at_level(logging.DEBUG, "mcpd.sse"):
        async with connected(server_side) as (server, t):
            with trio.move_on_after(0.2):
                await call(t, "slow")
            cancel = await server.session.wait_method("notifications/cancelled")
            assert cancel["params"] == {"requestId": 1, "reason": "cancelled by the client"}

            await server.session.send(reply(held[0], {"late": True}))
            assert await call(t, "echo", text="next") == {
                "content": [{"type": "text", "text": "next"}]
            }
            # Not cancellable: the server is not told.
            with trio.move_on_after(0.2):
                await t.request("tools/call", {"name": "slow"}, cancellable=False)
            assert await call(t, "echo", text="again") == {
                "content": [{"type": "text", "text": "again"}]
            }
    assert [m.get("method") for m in server.session.received].count("notifications/cancelled") == 1
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert (logging.DEBUG, "old: dropped a late response for id 1") in messages
    assert not [m for level, m in messages if level >= logging.WARNING]


async def never(session: Session, msg: Message) -> None:
    if msg.get("method") != "tools/call":
        await answer(session, msg)


@pytest.mark.parametrize("how", ["cut", "end"])
async def test_the_stream_going_away_fails_every_pending_request_at_once(how: str) -> None:
    failures: list[BaseException] = []

    async def waiting(t: LegacySSETransport) -> None:
        try:
            await call(t, "forever")
        except TransportError as exc:
            failures.append(exc)

    with trio.fail_after(LIMIT):
        async with connected(never) as (server, t):
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(waiting, t)
                while len([m for m in server.session.received if m.get("id")]) < 3:
                    await server.session._grew.wait()
                await (server.session.drop() if how == "cut" else server.session.end())
                await t.closed.wait()
            assert t.error is not None
            assert failures == [t.error] * 3
            before = len(server.requests)
            with pytest.raises(TransportError) as info:
                await call(t, "echo", text="after")
            assert info.value is t.error
            assert len(server.requests) == before  # nothing was sent
    if how == "cut":
        assert isinstance(t.error, StreamCut)
        assert t.error.reason.startswith("old: the event stream was cut: ")
    else:
        assert isinstance(t.error, TransportClosed)
        assert t.error.reason == "old: the server ended the event stream"


async def test_a_post_answered_404_after_a_restart_closes_the_transport() -> None:
    failures: list[BaseException] = []

    async def waiting(t: LegacySSETransport) -> None:
        try:
            await call(t, "forever")
        except TransportError as exc:
            failures.append(exc)

    with trio.fail_after(LIMIT):
        async with connected(never) as (server, t):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(waiting, t)
                await server.session.wait_method("tools/call")
                server.forget()  # the stream is still open; the session is not
                with pytest.raises(TransportClosed) as info:
                    await t.request("tools/list", None)
            assert t.closed.is_set()
            assert failures == [info.value] and t.error is info.value
            await server.session.disconnected.wait()  # the stream was let go
    assert info.value.reason == (
        "old: the server no longer takes messages for this session "
        '(HTTP 404 to tools/list (id 2): "Could not find session")'
    )


@pytest.mark.parametrize(
    ("status", "body", "closes"),
    [
        (400, "Invalid session ID", True),
        (400, "No transport found for sessionId", True),
        (400, "Could not parse message", False),
        (500, "boom", False),
        (503, "later", False),
    ],
)
async def test_refused_posts(status: int, body: str, closes: bool) -> None:
    inner = LegacySSEServer()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "POST":
            await respond.reply(status, body, {"Content-Type": "text/plain", "Retry-After": "3"})
        else:
            await inner(req, respond)

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery, serve_http(handler) as srv:
            inner.http, inner._nursery = srv, nursery
            async with open_legacy_sse_transport("old", srv.url("/sse")) as t:
                with pytest.raises(TransportError) as info:
                    await t.request("tools/list", None)
                assert t.closed.is_set() == closes
            nursery.cancel_scope.cancel()
    if closes:
        assert isinstance(info.value, TransportClosed)
        assert f'(HTTP {status} to tools/list (id 1): "{body}")' in info.value.reason
    else:
        assert f"HTTP {status}" in info.value.reason
    if status == 503:
        assert info.value.retry_after == 3


async def test_closing_with_requests_pending() -> None:
    failures: list[BaseException] = []

    async def waiting(t: LegacySSETransport) -> None:
        try:
            await call(t, "forever")
        except TransportError as exc:
            failures.append(exc)

    with trio.fail_after(LIMIT):
        async with serve_legacy_sse(never) as server:
            # Left while the call waited: the call ends (the nursery waits for it).
            async with (
                trio.open_nursery() as nursery,
                open_legacy_sse_transport("old", server.url()) as t,
            ):
                nursery.start_soon(waiting, t)
                await server.session.wait_method("tools/call")
            await server.session.disconnected.wait()
    assert failures == [t.error]
    assert t.error is not None and t.error.reason == "old: transport closed"
