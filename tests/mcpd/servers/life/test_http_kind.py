"""Which HTTP transport a server speaks, asked when the one tried failed: only for a
failure that can mean the other transport, and a server that answers the question
oddly (refuses it, never answers, answers too much) is taken as saying nothing."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.servertable import ServerConfig
from mcpd.servers.life.http_kind import other_kind
from protocol.jsonrpc.reply_faults import MalformedReply
from tests.support.http_servers.legacy_sse import serve_legacy_sse
from tests.support.http_servers.serving import Responder, SeenRequest, result, serve_http
from transports.errors import TransportClosed, UnexpectedReply

LIMIT = 10


def server(url: str, **more: Any) -> ServerConfig:
    cfg = parse_config({"servers": {"s": {"url": url, **more}}}, env={"HOME": "/nonexistent"})
    return cfg.servers["s"]


def refused(status: int) -> UnexpectedReply:
    return UnexpectedReply(f"s: HTTP {status} to POST", status=status)


async def test_a_stdio_server_or_a_failure_about_something_else_is_not_asked() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.reply(404)

    stdio = parse_config({"servers": {"s": {"command": "srv"}}}, env={"HOME": "/h"}).servers["s"]
    assert await other_kind("s", stdio, "stdio", refused(404)) is None
    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            remote = server(srv.url())
            assert await other_kind("s", remote, "stdio", refused(404)) is None
            assert await other_kind("s", remote, "http", TransportClosed("s: reset")) is None
            assert await other_kind("s", remote, "http", MalformedReply("s: bad")) is None
    assert srv.requests == []


@pytest.mark.parametrize("status", [500, 502, 401, 403, 407, 408, 425, 429, 302])
async def test_a_status_that_is_not_about_the_transport_asks_nothing(status: int) -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.reply(500)

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            found = await other_kind("s", server(srv.url()), "http", refused(status))
    assert found is None
    assert srv.requests == []


@pytest.mark.parametrize("status", [400, 404, 405, 406, 415])
async def test_a_streamable_url_that_is_an_old_sse_server_is_found(status: int) -> None:
    with trio.fail_after(LIMIT):
        async with serve_legacy_sse() as legacy:
            cfg = server(legacy.url(), transport="http", headers={"X-Team": "a"})
            found = await other_kind("s", cfg, "http", refused(status))
    assert found == "sse"
    # Asked with the server's configured headers.
    assert all(r.header("x-team") == "a" for r in legacy.requests)


async def test_an_sse_url_that_is_a_streamable_server_is_found() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "POST":
            await respond.json(result(req.rpc_id, {"protocolVersion": "2025-06-18"}))
        else:
            await respond.reply(405)

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            found = await other_kind("s", server(srv.url("/sse")), "sse", refused(404))
    assert found == "http"


async def test_the_same_kind_found_again_is_no_switch() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "POST":
            await respond.json(result(req.rpc_id, {"protocolVersion": "2025-06-18"}))
        else:
            await respond.reply(405)

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            assert await other_kind("s", server(srv.url()), "http", refused(404)) is None


async def test_a_server_that_is_neither_is_no_switch() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.reply(404, "not here", {"Content-Type": "text/plain"})

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            assert await other_kind("s", server(srv.url()), "http", refused(404)) is None
    assert [r.method for r in srv.requests] == ["POST", "GET"]


async def test_a_server_that_never_answers_the_question_is_no_switch() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.wait_disconnect()

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            cfg = server(srv.url(), connect_timeout=0.2)
            assert await other_kind("s", cfg, "http", refused(404)) is None


async def test_a_server_that_answers_the_question_with_too_much_is_no_switch() -> None:
    # A reply over mcpd's size limit: the server said nothing about its transport, and
    # the runner that asked goes on as after any failure.
    async def handler(req: SeenRequest, respond: Responder) -> None:
        head = [("Content-Type", "application/json"), ("Content-Length", str(1 << 40))]
        await respond.start(200, head)
        await respond.wait_disconnect()

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            assert await other_kind("s", server(srv.url()), "http", refused(404)) is None
    assert [r.method for r in srv.requests] == ["POST"]
