"""The Streamable HTTP transport against in-process h11 servers: replies, streams, headers."""

from __future__ import annotations

import gzip
import json
import logging
from typing import Any

import msgspec
import pytest
import trio

from protocol.http import mcp_headers
from protocol.jsonrpc.messages import Notification, RPCError
from protocol.jsonrpc.reply_faults import MalformedReply, MessageTooLarge
from tests.support.http_servers.serving import (
    Responder,
    SeenRequest,
    error,
    event,
    notification,
    result,
    serve_http,
)
from transports.errors import HttpRPCError, StreamCut, TransportError, UnexpectedReply
from transports.http import answer as _httpanswer
from transports.http.params import HttpParams
from transports.http.transport import HttpTransport, open_http_transport

LIMIT = 10


def value(raw: msgspec.Raw) -> Any:
    return json.loads(bytes(raw))


async def answer_json(req: SeenRequest, respond: Responder) -> None:
    await respond.json(result(req.rpc_id, {"echo": req.rpc_method}))


async def test_json_reply_and_request_headers() -> None:
    with trio.fail_after(LIMIT):
        async with (
            serve_http(answer_json) as srv,
            open_http_transport(
                "notes",
                srv.url(),
                HttpParams(headers={"Authorization": "Bearer s3cret", "X-Extra": "1"}),
            ) as t,
        ):
            mirrored = mcp_headers.request_headers("2026-07-28", "tools/call", "search")
            raw = await t.request(
                "tools/call", {"name": "search", "arguments": {}}, headers=mirrored
            )
    assert value(raw) == {"echo": "tools/call"}
    (req,) = srv.requests
    assert (req.method, req.target) == ("POST", "/mcp")
    assert req.header("host") == f"127.0.0.1:{srv.port}"
    assert req.header("content-type") == "application/json"
    assert req.header("accept") == "application/json, text/event-stream"
    assert req.header("accept-encoding") == "identity"
    assert req.header("authorization") == "Bearer s3cret"
    assert req.header("x-extra") == "1"
    assert req.header("mcp-protocol-version") == "2026-07-28"
    assert req.header("mcp-method") == "tools/call"
    assert req.header("mcp-name") == "search"
    assert req.header("mcp-session-id") is None
    assert req.message == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {}},
    }


async def test_a_server_that_compresses_what_any_coding_may_take_answers_plainly() -> None:
    # As a server or a proxy in front of it may: a request without Accept-Encoding takes
    # any coding, and mcpd decodes none.
    async def compressing(req: SeenRequest, respond: Responder) -> None:
        body = json.dumps(result(req.rpc_id, {"tools": []})).encode()
        if req.header("accept-encoding") != "identity":
            headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
            return await respond.reply(200, gzip.compress(body), headers)
        await respond.reply(200, body, {"Content-Type": "application/json"})

    with trio.fail_after(LIMIT):
        async with (
            serve_http(compressing) as srv,
            open_http_transport("cdn", srv.url()) as t,
        ):
            raw = await t.request("tools/list", None)
    assert value(raw) == {"tools": []}
    assert [r.header("accept-encoding") for r in srv.requests] == ["identity"]


async def test_per_request_headers_override_configured_ones() -> None:
    with trio.fail_after(LIMIT):
        async with (
            serve_http(answer_json) as srv,
            open_http_transport(
                "a", srv.url(), HttpParams(headers={"Authorization": "Bearer old"})
            ) as t,
        ):
            await t.request("ping", {}, headers={"authorization": "Bearer new"})
    (req,) = srv.requests
    assert [v for k, v in req.headers if k == "authorization"] == ["Bearer new"]


async def test_ids_are_fresh_per_request() -> None:
    with trio.fail_after(LIMIT):
        async with serve_http(answer_json) as srv, open_http_transport("a", srv.url()) as t:
            for _ in range(3):
                await t.request("tools/list", {})
    assert [r.rpc_id for r in srv.requests] == [1, 2, 3]


async def test_sse_reply_with_notifications_around_the_response() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.sse(
            "id: prime-1\ndata: \n\n",  # priming event: empty data
            ": keep-alive\n\n",
            event(notification("notifications/progress", {"progressToken": "t", "progress": 1})),
            event(notification("notifications/message", {"level": "info"}), kind=None),
            event({"jsonrpc": "2.0", "method": "other/kind"}, kind="custom"),
            event(result(999, {"not": "ours"})),
            # A response split over two data lines and two chunks.
            'event: message\ndata: {"jsonrpc":"2.0",',
            f'\ndata: "id":{req.rpc_id},"result":{{"ok":true}}}}\n\n',
            event(notification("notifications/progress", {"progressToken": "t", "progress": 2})),
            headers={"X-Accel-Buffering": "no"},
        )

    seen: list[Notification] = []
    with trio.fail_after(LIMIT):
        async with (
            serve_http(handler) as srv,
            open_http_transport("a", srv.url(), on_notification=seen.append) as t,
        ):
            raw = await t.request("tools/call", {"name": "x"})
    assert value(raw) == {"ok": True}
    assert [n.method for n in seen] == [
        "notifications/progress",
        "notifications/message",
        "notifications/progress",
    ]
    assert value(seen[0].params) == {"progressToken": "t", "progress": 1}


async def test_sse_error_response_raises_rpc_error() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.sse(event(error(req.rpc_id, -32602, "bad arguments")))

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv, open_http_transport("a", srv.url()) as t:
            with pytest.raises(RPCError) as info:
                await t.request("tools/call", {"name": "x"})
    assert (info.value.code, info.value.message) == (-32602, "bad arguments")
    assert isinstance(info.value, HttpRPCError)
    assert info.value.http_status == 200


async def test_stream_cut_before_the_response() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.sse_start()
        await respond.send(event(notification("notifications/progress", {"progress": 1})))
        await respond.cut()

    seen: list[Notification] = []
    with trio.fail_after(LIMIT):
        async with (
            serve_http(handler) as srv,
            open_http_transport("a", srv.url(), on_notification=seen.append) as t,
        ):
            with pytest.raises(StreamCut, match="cut before its response"):
                await t.request("tools/call", {"name": "x"})
            # The transport is still usable: the broken connection was not pooled.
            srv.handler = answer_json
            assert value(await t.request("tools/list", {})) == {"echo": "tools/list"}
    assert len(seen) == 1
    assert srv.connections == 2


async def test_stream_that_ends_without_the_response() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.sse("id: 1\ndata: \n\n", event(result(req.rpc_id + 1, {})))

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv, open_http_transport("a", srv.url()) as t:
            with pytest.raises(StreamCut, match=r"ended before its response \(2 events read\)"):
                await t.request("tools/call", {"name": "x"})


async def test_a_response_the_stream_ends_inside_is_not_taken(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        # Whole JSON, but the event never got its blank line: it may be cut short.
        await respond.sse(f"data: {json.dumps(result(req.rpc_id, 5))}\n")

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv, open_http_transport("a", srv.url()) as t:
            with pytest.raises(StreamCut, match=r"ended before its response \(0 events read\)"):
                await t.request("x", {})
    assert "not JSON-RPC" not in caplog.text


async def test_stream_left_open_after_the_response(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_httpanswer, "DRAIN_TIMEOUT", 0.05)
    hung_up = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "open":
            await respond.sse_start()
            await respond.send(event(result(req.rpc_id, "answer")))
            await respond.wait_disconnect()
            hung_up.set()
        else:
            await answer_json(req, respond)

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv, open_http_transport("a", srv.url()) as t:
            assert value(await t.request("open", {})) == "answer"
            await hung_up.wait()  # the connection was given up, not pooled half-read
            await t.request("next", {})
    assert [r.connection for r in srv.requests] == [0, 1]


async def test_header_mirror_checked_by_the_server() -> None:
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {
                "type": "object",
                "properties": {"limit": {"type": "integer", "x-mcp-header": "Limit"}},
            },
            "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
        },
    }
    params_map = mcp_headers.header_params(schema)

    async def handler(req: SeenRequest, respond: Responder) -> None:
        # What a conforming 2026-07-28 server checks, after decoding sentinels.
        params = req.message["params"]
        args = params.get("arguments", {})
        expected = {
            "mcp-method": req.rpc_method,
            "mcp-name": params["name"],
            "mcp-param-region": args.get("region"),
            "mcp-param-limit": str(args["opts"]["limit"]) if "opts" in args else None,
            "mcp-param-dry-run": None if "dry" not in args else str(args["dry"]).lower(),
        }
        for name, want in expected.items():
            got = req.header(name)
            got = None if got is None else mcp_headers.decode_value(got)
            if got != want:
                await respond.json(error(req.rpc_id, -32020, f"Header mismatch: {name}"), 400)
                return
        await respond.json(result(req.rpc_id, {"resultType": "complete", "content": []}))

    async def call(t: HttpTransport, name: str, args: dict[str, Any]) -> msgspec.Raw:
        hdrs = mcp_headers.request_headers("2026-07-28", "tools/call", name)
        hdrs.update(mcp_headers.param_headers(params_map, args))
        return await t.request("tools/call", {"name": name, "arguments": args}, headers=hdrs)

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv, open_http_transport("a", srv.url()) as t:
            await call(
                t, "数据 query", {"region": "Hello, 世界", "opts": {"limit": 42}, "dry": True}
            )
            await call(t, "plain", {"region": " padded "})
            await call(t, "=?base64?x?=", {})
            with pytest.raises(RPCError) as info:
                await t.request(
                    "tools/call",
                    {"name": "plain", "arguments": {"region": "eu"}},
                    headers=mcp_headers.request_headers("2026-07-28", "tools/call", "plain"),
                )
    assert info.value.code == -32020
    assert getattr(info.value, "http_status", None) == 400
    first = srv.requests[0]
    assert first.header("mcp-name") == "=?base64?5pWw5o2uIHF1ZXJ5?="
    assert first.header("mcp-param-region") == "=?base64?SGVsbG8sIOS4lueVjA==?="
    assert first.header("mcp-param-limit") == "42"
    assert first.header("mcp-param-dry-run") == "true"
    assert srv.requests[1].header("mcp-param-region") == "=?base64?IHBhZGRlZCA=?="
    assert srv.requests[2].header("mcp-name") == "=?base64?PT9iYXNlNjQ/eD89?="


def test_bad_configured_headers_are_refused_without_echoing_the_value() -> None:
    with pytest.raises(ValueError, match="Content-Type") as info:
        HttpTransport(
            "a", "http://127.0.0.1:1/mcp", HttpParams(headers={"Content-Type": "text/plain"})
        )
    with pytest.raises(ValueError, match="Authorization") as info:
        HttpTransport(
            "a", "http://127.0.0.1:1/mcp", HttpParams(headers={"Authorization": "Bearer x\r\ny"})
        )
    assert "Bearer" not in str(info.value)
    with pytest.raises(ValueError, match="header name"):
        HttpTransport("a", "http://127.0.0.1:1/mcp", HttpParams(headers={"Bad Name": "v"}))
    with pytest.raises(ValueError, match="http"):
        HttpTransport("a", "ftp://example.com/mcp")
    with pytest.raises(ValueError, match="credentials"):
        HttpTransport("a", "http://user:pw@example.com/mcp")


async def test_configured_header_values_never_reach_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.target == "/old":
            await respond.reply(308, headers={"Location": "/mcp"})
        else:
            await respond.reply(401, headers={"WWW-Authenticate": 'Bearer realm="x"'})

    caplog.set_level(logging.DEBUG)
    with trio.fail_after(LIMIT):
        async with (
            serve_http(handler) as srv,
            open_http_transport(
                "a", srv.url("/old"), HttpParams(headers={"Authorization": "Bearer TOPSECRET"})
            ) as t,
        ):
            with pytest.raises(TransportError) as info:
                await t.request("x", {})
    assert "TOPSECRET" not in caplog.text
    assert "TOPSECRET" not in info.value.describe()


async def test_body_over_the_limit_is_refused_without_reading_it() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        kind = req.message["params"]["kind"]
        if kind == "declared":
            # Announce 10 MB, send a little, then stall: reading it all would hang.
            await respond.start(
                200, {"Content-Type": "application/json", "Content-Length": "10000000"}
            )
            await respond.send(b'{"jsonrpc":"2.0",')
        elif kind == "chunked":
            await respond.start(200, {"Content-Type": "application/json"})
            for _ in range(4):
                await respond.send(b" " * 1000)
        else:
            await respond.sse_start()
            await respond.send(b"data: " + b"x" * 4000)
        await respond.wait_disconnect()

    with trio.fail_after(LIMIT):
        async with (
            serve_http(handler) as srv,
            open_http_transport("a", srv.url(), HttpParams(max_body=2048)) as t,
        ):
            for kind in ("declared", "chunked", "sse"):
                # The server is fine; only the request its answer was for fails.
                with pytest.raises(MessageTooLarge, match="larger than the 2048-byte line limit"):
                    await t.request("x", {"kind": kind})


async def test_garbage_replies_are_clear_errors() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        kind = req.message["params"]["kind"]
        if kind == "utf8":
            body = b'{"jsonrpc":"2.0","id":%d,"result":{"t":"\xff"}}' % req.rpc_id
            await respond.reply(200, body, {"Content-Type": "application/json"})
        elif kind == "json":
            await respond.reply(200, b"{not json", {"Content-Type": "application/json"})
        elif kind == "sse-json":
            await respond.sse("data: {nope\n\n")
        elif kind == "html":
            await respond.reply(200, b"<html>hi</html>", {"Content-Type": "text/html"})
        elif kind == "accepted":
            await respond.reply(202)
        elif kind == "other-id":
            await respond.json(result(12345, {}))
        else:
            await respond.raw(b"HTTP/1.1 2OO OK\r\n\r\n")

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv, open_http_transport("a", srv.url()) as t:
            for kind, match in [
                ("utf8", "invalid JSON-RPC in the response body"),
                ("json", "invalid JSON-RPC in the response body"),
                ("sse-json", "invalid JSON-RPC in the event"),
                ("html", 'content type "text/html"'),
                ("accepted", "HTTP 202"),
                ("http", "invalid HTTP"),
            ]:
                with pytest.raises(UnexpectedReply, match=match):
                    await t.request("x", {"kind": kind})
            # The server answered, under an id none of ours has: not a server that is down.
            with pytest.raises(MalformedReply, match=r"for no request in flight \(id 12345\)"):
                await t.request("x", {"kind": "other-id"})


async def test_notification_handler_failure_does_not_break_the_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.sse(event(notification("n/x")), event(result(req.rpc_id, 1)))

    def broken(n: Notification) -> None:
        raise RuntimeError("handler bug")

    with trio.fail_after(LIMIT):
        async with (
            serve_http(handler) as srv,
            open_http_transport("a", srv.url(), on_notification=broken) as t,
        ):
            assert value(await t.request("x", {})) == 1
    assert "notification handler failed" in caplog.text


async def test_closed_transport_refuses_requests() -> None:
    with trio.fail_after(LIMIT):
        async with serve_http(answer_json) as srv, open_http_transport("a", srv.url()) as t:
            pass
        with pytest.raises(TransportError, match="closed"):
            await t.request("x", {})
    assert srv.requests == []
