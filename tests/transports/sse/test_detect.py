"""Telling a server's HTTP transport at one URL: Streamable HTTP, or the HTTP+SSE of
MCP 2024-11-05."""

from __future__ import annotations

import pytest
import trio

from tests.support.http_servers.legacy_sse import serve_legacy_sse
from tests.support.http_servers.serving import Responder, SeenRequest, result, serve_http
from transports.errors import AuthError, TransportError, UnexpectedReply
from transports.http.params import HttpParams
from transports.sse.detect import detect_http_transport, looks_like_sse

LIMIT = 10


async def streamable(req: SeenRequest, respond: Responder) -> None:
    if req.method == "POST" and req.rpc_method == "initialize":
        value = {"protocolVersion": "2025-11-25", "capabilities": {}}
        await respond.json(result(req.rpc_id, value), headers={"Mcp-Session-Id": "sess-1"})
    elif req.method == "DELETE":
        await respond.reply(200)
    else:
        await respond.reply(405, "", {"Allow": "POST, DELETE"})


async def test_detect_a_streamable_http_server() -> None:
    with trio.fail_after(LIMIT):
        async with serve_http(streamable) as srv:
            kind = await detect_http_transport("x", srv.url(), HttpParams(headers={"X-Key": "k"}))
    assert kind == "streamable-http"
    init, delete = srv.requests
    assert (init.rpc_method, init.header("x-key")) == ("initialize", "k")
    # The session the probe opened is ended.
    assert (delete.method, delete.header("mcp-session-id")) == ("DELETE", "sess-1")


async def test_detect_an_old_sse_server() -> None:
    with trio.fail_after(LIMIT):
        async with serve_legacy_sse() as server:
            kind = await detect_http_transport(
                "x", server.url(), HttpParams(headers={"X-Key": "k"})
            )
            await server.session.disconnected.wait()
    assert kind == "sse"
    post, get = server.requests
    assert (post.method, post.rpc_method, get.method) == ("POST", "initialize", "GET")
    assert get.header("x-key") == "k"
    # Nothing was sent to the old server's endpoint: the daemon does the handshake.
    assert server.session.received == []


async def test_detect_neither() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.reply(404, "Not Found", {"Content-Type": "text/html"})

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            with pytest.raises(UnexpectedReply) as info:
                await detect_http_transport("x", srv.url("/nothing"))
    assert info.value.reason == (
        f"x: {srv.url('/nothing')} is neither a Streamable HTTP endpoint (POST initialize: "
        "HTTP 404 to initialize (id 1) without a JSON-RPC error) nor an HTTP+SSE one "
        "(GET: HTTP 404 to GET without a JSON-RPC error)"
    )


async def test_detect_a_json_rpc_refusal_as_streamable() -> None:
    # A modern-only server refuses initialize in JSON-RPC and offers no GET stream.
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "POST":
            err = {"code": -32022, "message": "Unsupported protocol version"}
            await respond.json({"jsonrpc": "2.0", "id": req.rpc_id, "error": err}, 400)
        else:
            await respond.reply(405)

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            assert await detect_http_transport("x", srv.url()) == "streamable-http"
    assert [r.method for r in srv.requests] == ["POST", "GET"]


@pytest.mark.parametrize("status", [401, 403])
async def test_detect_refused_credentials(status: int) -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.reply(status, "", {"WWW-Authenticate": "Bearer"})

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            with pytest.raises(AuthError):
                await detect_http_transport("x", srv.url())
    assert [r.method for r in srv.requests] == ["POST"]


async def test_detect_a_server_that_is_down() -> None:
    async with serve_http(streamable) as srv:
        url = srv.url()
    with trio.fail_after(LIMIT), pytest.raises(TransportError, match="cannot connect"):
        await detect_http_transport("x", url, HttpParams(connect_timeout=2))


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://example.com/sse", True),
        ("https://example.com/sse/", True),
        ("http://127.0.0.1:8000/v1/SSE?key=1", True),
        ("https://example.com/mcp", False),
        ("https://example.com/sse/mcp", False),
        ("https://example.com/messages-sse", False),
        ("https://sse.example.com/", False),
        ("http://[::1", False),
    ],
)
def test_looks_like_sse(url: str, expected: bool) -> None:
    assert looks_like_sse(url) is expected
