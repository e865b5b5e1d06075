"""The demo runtime's Streamable HTTP, served in process on loopback: routing by path,
method and era, legacy sessions (their ids, cancels and limit), the ready file, and
what a client that misbehaves gets."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.demo import http as demo_http
from mcpd.demo.runtime import DemoServer, ToolContext, object_schema
from tests.support.clients.demo import (
    LEGACY,
    POST_HEADERS,
    HttpConn,
    cancel,
    http,
    initialize,
    meta,
    modern_headers,
    request,
    text_of,
)

LIMIT = 10


class Served:
    """A demo server in this process, and what its tools saw."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def session(self) -> dict[str, str]:
        """A new legacy session's request headers."""
        init = await http(self.port, "POST", POST_HEADERS, initialize(1))
        assert init.status == 200, init
        return {**POST_HEADERS, "mcp-session-id": init.headers["mcp-session-id"]}


class Calls:
    """The ids of the ``block`` calls that started and that ended, in order."""

    def __init__(self) -> None:
        self.started: list[Any] = []
        self.ended: list[Any] = []
        self.end = trio.Event()


def blocking_server(calls: Calls | None = None) -> DemoServer:
    server = DemoServer("blocking")
    seen = calls if calls is not None else Calls()

    @server.tool("Block until cancelled.")
    async def block(args: dict[str, Any], ctx: ToolContext) -> str:
        seen.started.append(ctx.request_id)
        try:
            await ctx.progress(0)
            await trio.sleep_forever()
        finally:
            seen.ended.append(ctx.request_id)
            seen.end.set()

    @server.tool("Say it back.", object_schema({"text": {"type": "string"}}, ["text"]))
    async def echo(args: dict[str, Any], ctx: ToolContext) -> str:
        return str(args["text"])

    return server


@asynccontextmanager
async def served(server: DemoServer, host: str = "127.0.0.1") -> AsyncIterator[Served]:
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(demo_http.serve_http, server, host, 0)
            yield Served(port)
            nursery.cancel_scope.cancel()


def legacy_call(rid: int, name: str, arguments: dict[str, Any], **m: Any) -> dict[str, Any]:
    return request(rid, "tools/call", {"name": name, "arguments": arguments, "_meta": m})


async def test_the_ready_file_gets_the_bound_port(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            serve = functools.partial(demo_http.serve_http, ready_file=str(ready))
            port = await nursery.start(serve, DemoServer("x"), "127.0.0.1", 0)
            assert ready.read_text() == f"{port}\n"
            nursery.cancel_scope.cancel()


async def test_only_the_endpoint_is_served_and_its_query_is_ignored() -> None:
    async with served(blocking_server()) as echo:
        body = request(1, "server/discover", {"_meta": meta()})
        headers = modern_headers("server/discover")
        assert await _post_to(echo.port, "/mcp", headers, body) == 200
        assert await _post_to(echo.port, "/other", headers, body) == 404
        assert await _post_to(echo.port, "/mcp?x=1", headers, body) == 200
        assert await _post_to(echo.port, "/mcpx", headers, body) == 404


async def _post_to(port: int, target: str, headers: dict[str, str], body: Any) -> int:
    """The status a POST to ``target`` gets."""
    data = json.dumps(body).encode()
    fields = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    raw = (
        f"POST {target} HTTP/1.1\r\nhost: 127.0.0.1\r\n{fields}"
        f"content-length: {len(data)}\r\nconnection: close\r\n\r\n"
    ).encode() + data
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(raw)
        got = b""
        while b"\r\n" not in got:
            got += await stream.receive_some()
    return int(got.split(b" ")[1])


async def test_a_legacy_request_of_another_method_is_refused_with_those_allowed() -> None:
    async with served(blocking_server()) as echo:
        reply = await http(echo.port, "PUT", {})
        assert (reply.status, reply.headers["allow"]) == (405, "GET, POST, DELETE")


async def test_an_origin_of_the_served_host_is_allowed_and_others_are_not() -> None:
    body = request(1, "server/discover", {"_meta": meta()})
    async with served(blocking_server(), host="127.0.0.1") as srv:
        own = {**modern_headers("server/discover"), "origin": "http://127.0.0.1:9"}
        assert (await http(srv.port, "POST", own, body)).status == 200
        other = {**modern_headers("server/discover"), "origin": "http://127.0.0.2"}
        refused = await http(srv.port, "POST", other, body)
    assert refused.status == 403
    assert refused.json()["error"]["message"] == "Forbidden: origin not allowed"


async def test_a_legacy_post_without_a_session_or_with_an_unknown_one_is_refused() -> None:
    async with served(blocking_server()) as echo:
        missing = await http(echo.port, "POST", POST_HEADERS, request(2, "tools/list"))
        assert missing.status == 400
        assert missing.json()["error"]["message"] == "Bad Request: Missing session ID"
        unknown = {**POST_HEADERS, "mcp-session-id": "feed"}
        assert (await http(echo.port, "POST", unknown, request(2, "tools/list"))).status == 404


async def test_a_failed_initialize_opens_no_session() -> None:
    async with served(blocking_server()) as echo:
        bad = request(1, "initialize", {"protocolVersion": 5})
        reply = await http(echo.port, "POST", POST_HEADERS, bad)
        assert reply.status == 200
        assert "error" in reply.json()
        assert "mcp-session-id" not in reply.headers


async def test_each_initialize_opens_a_session_of_its_own() -> None:
    async with served(blocking_server()) as echo:
        first = await echo.session()
        second = await echo.session()
        assert first["mcp-session-id"] != second["mcp-session-id"]
        assert len(first["mcp-session-id"]) == 32
        for session in (first, second):
            listed = await http(echo.port, "POST", session, request(2, "tools/list"))
            assert [t["name"] for t in listed.json()["result"]["tools"]] == ["block", "echo"]


async def test_what_a_legacy_client_posts_that_is_no_request_is_accepted() -> None:
    async with served(blocking_server()) as echo:
        session = await echo.session()
        answer = {"jsonrpc": "2.0", "id": "s1", "result": {}}
        assert (await http(echo.port, "POST", session, answer)).status == 202
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http(echo.port, "POST", session, note)).status == 202


async def test_a_request_id_in_use_in_the_session_is_refused() -> None:
    calls = Calls()
    async with served(blocking_server(calls)) as srv:
        session = await srv.session()
        async with HttpConn.open(srv.port) as conn:
            await conn.start("POST", session, legacy_call(2, "block", {}, progressToken=2))
            await conn.next_event()
            again = await http(srv.port, "POST", session, legacy_call(2, "echo", {"text": "x"}))
            assert again.status == 400
            assert again.json()["error"]["message"] == "Request id 2 is in use"
            # Another session may use the same id.
            other = await srv.session()
            mine = await http(srv.port, "POST", other, legacy_call(2, "echo", {"text": "x"}))
            assert text_of(mine.json()) == "x"
    assert calls.started == [2]


async def test_an_id_is_free_again_once_its_request_is_answered() -> None:
    async with served(blocking_server()) as echo:
        session = await echo.session()
        for text in ("a", "b"):
            reply = await http(echo.port, "POST", session, legacy_call(3, "echo", {"text": text}))
            assert text_of(reply.json()) == text


@pytest.mark.parametrize(
    "params",
    [{"requestId": 9}, {"requestId": [2]}, {"requestId": True}, {}, None],
    ids=["unknown", "a-list", "a-bool", "no-id", "no-params"],
)
async def test_a_cancel_for_no_request_of_the_session_cancels_nothing(
    params: dict[str, Any] | None,
) -> None:
    calls = Calls()
    async with served(blocking_server(calls)) as srv:
        session = await srv.session()
        async with HttpConn.open(srv.port) as conn:
            await conn.start("POST", session, legacy_call(2, "block", {}, progressToken=2))
            await conn.next_event()
            note: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
            if params is not None:
                note["params"] = params
            assert (await http(srv.port, "POST", session, note)).status == 202
            # The request still runs: the session answers others, and only the real
            # cancel ends it.
            echoed = await http(srv.port, "POST", session, legacy_call(3, "echo", {"text": "y"}))
            assert text_of(echoed.json()) == "y"
            assert calls.ended == []
            assert (await http(srv.port, "POST", session, cancel(2))).status == 202
            assert await conn.chunk() is None
    assert calls.ended == [2]


async def test_a_cancel_in_another_session_does_not_reach_this_one() -> None:
    calls = Calls()
    async with served(blocking_server(calls)) as srv:
        mine = await srv.session()
        theirs = await srv.session()
        async with HttpConn.open(srv.port) as conn:
            await conn.start("POST", mine, legacy_call(2, "block", {}, progressToken=2))
            await conn.next_event()
            assert (await http(srv.port, "POST", theirs, cancel(2))).status == 202
            await http(srv.port, "POST", mine, legacy_call(3, "echo", {"text": "y"}))
            assert calls.ended == []


async def test_the_stream_of_a_session_needs_an_event_stream_accepted() -> None:
    async with served(blocking_server()) as echo:
        session = await echo.session()
        sid = {"mcp-session-id": session["mcp-session-id"]}
        refused = await http(echo.port, "GET", {**sid, "accept": "application/json"})
        assert (refused.status, refused.body) == (406, b"GET needs Accept: text/event-stream")
        assert (await http(echo.port, "GET", {"accept": "text/event-stream"})).status == 400


async def test_past_the_session_limit_the_oldest_is_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(demo_http, "MAX_SESSIONS", 2)
    calls = Calls()
    async with served(blocking_server(calls)) as srv:
        oldest = await srv.session()
        middle = await srv.session()
        async with HttpConn.open(srv.port) as conn:
            await conn.start("POST", oldest, legacy_call(5, "block", {}, progressToken=5))
            await conn.next_event()
            newest = await srv.session()
            # The oldest session's request is cancelled and its stream ends unanswered.
            assert await conn.chunk() is None
        assert calls.ended == [5]
        gone = await http(srv.port, "POST", oldest, request(2, "tools/list"))
        assert gone.status == 404
        for kept in (middle, newest):
            assert (await http(srv.port, "POST", kept, request(2, "tools/list"))).status == 200


async def test_a_modern_request_on_a_handshake_version_is_a_legacy_one() -> None:
    async with served(blocking_server()) as echo:
        # The handshake version in the header routes it to the session protocol, which
        # needs a session.
        headers = {**POST_HEADERS, "mcp-protocol-version": LEGACY}
        reply = await http(echo.port, "POST", headers, request(2, "tools/list", {"_meta": meta()}))
        assert reply.status == 400
        assert reply.json()["error"]["message"] == "Bad Request: Missing session ID"


async def test_malformed_http_gets_a_400_and_the_server_serves_on() -> None:
    async with served(blocking_server()) as echo:
        stream = await trio.open_tcp_stream("127.0.0.1", echo.port)
        async with stream:
            await stream.send_all(b"NOT HTTP AT ALL\r\n\r\n")
            got = b""
            while (piece := await stream.receive_some()) != b"":
                got += piece
        assert got.startswith(b"HTTP/1.1 400 ")
        body = request(1, "server/discover", {"_meta": meta()})
        assert (
            await http(echo.port, "POST", modern_headers("server/discover"), body)
        ).status == 200


async def test_a_client_hanging_up_on_a_legacy_request_cancels_it() -> None:
    calls = Calls()
    async with served(blocking_server(calls)) as srv:
        session = await srv.session()
        async with HttpConn.open(srv.port) as conn:
            await conn.start("POST", session, legacy_call(4, "block", {}, progressToken=4))
            await conn.next_event()
        # Its id is free again once the hang-up cancelled it.
        await calls.end.wait()
        assert calls.ended == [4]
        reply = await http(srv.port, "POST", session, legacy_call(4, "echo", {"text": "z"}))
        assert text_of(reply.json()) == "z"
