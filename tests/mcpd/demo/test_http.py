"""The demo servers over Streamable HTTP, as real child processes, in both eras."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from tests.support.clients.demo import (
    CUSTOM,
    INITIALIZED,
    MODERN,
    POST_HEADERS,
    TICKETS,
    HttpConn,
    call,
    cancel,
    http,
    initialize,
    meta,
    modern_headers,
    request,
    spawn_http,
    spawn_http_child,
    text_of,
)

SERVER_INFO = "io.modelcontextprotocol/serverInfo"


@pytest.fixture
async def tickets(tmp_path: Path) -> AsyncIterator[int]:
    with trio.fail_after(20):
        async with spawn_http([*TICKETS, "--page-size", "2"], tmp_path) as port:
            yield port


@pytest.fixture
async def custom(tmp_path: Path) -> AsyncIterator[int]:
    with trio.fail_after(20):
        async with spawn_http(CUSTOM, tmp_path) as port:
            yield port


async def test_modern_discover_pages_and_call(tickets: int) -> None:
    with trio.fail_after(20):
        reply = await http(
            tickets,
            "POST",
            modern_headers("server/discover"),
            request(1, "server/discover", {"_meta": meta()}),
        )
        assert reply.status == 200
        discover = reply.json()["result"]
        assert discover["supportedVersions"] == [MODERN]
        assert discover["resultType"] == "complete" and "ttlMs" in discover
        assert discover["_meta"][SERVER_INFO]["name"] == "tickets"
        assert "mcp-session-id" not in reply.headers

        names: list[str] = []
        params: dict[str, object] = {"_meta": meta()}
        for i in range(2, 10):
            page = (
                await http(
                    tickets, "POST", modern_headers("tools/list"), request(i, "tools/list", params)
                )
            ).json()
            result = page["result"]
            assert result["resultType"] == "complete" and result["cacheScope"] in (
                "public",
                "private",
            )
            names += [t["name"] for t in result["tools"]]
            if "nextCursor" not in result:
                break
            params = {"_meta": meta(), "cursor": result["nextCursor"]}
        assert names == ["search", "get_ticket", "create_ticket"]

        got = await http(
            tickets,
            "POST",
            modern_headers("tools/call", "get_ticket"),
            call(10, "get_ticket", {"id": "T-5"}),
        )
        assert got.status == 200 and got.content_type == "application/json"
        assert got.json()["result"]["structuredContent"]["priority"] == "high"


async def test_progress_turns_the_answer_into_an_event_stream(tickets: int) -> None:
    with trio.fail_after(20):
        headers = modern_headers("tools/call", "search")
        streamed = await http(
            tickets, "POST", headers, call(1, "search", {"query": "backup"}, progressToken="p")
        )
        assert streamed.status == 200
        progress, answer = streamed.events()
        assert progress["method"] == "notifications/progress"
        assert progress["params"]["progressToken"] == "p"
        assert answer["id"] == 1 and "T-5" in text_of(answer)

        plain = await http(tickets, "POST", headers, call(2, "search", {"query": "backup"}))
        assert plain.status == 200 and "T-5" in text_of(plain.json())


async def test_keep_alive_serves_several_requests_on_one_connection(tickets: int) -> None:
    with trio.fail_after(20):
        async with HttpConn.open(tickets) as conn:
            for i in range(3):
                reply = await conn.request(
                    "POST",
                    modern_headers("tools/call", "search"),
                    call(i, "search", {"query": "dark"}, progressToken=i),
                )
                assert reply.events()[-1]["id"] == i


@pytest.mark.parametrize(
    ("headers", "body", "status", "code"),
    [
        (modern_headers("tools/list"), call(1, "search", {"query": "x"}), 400, -32020),
        (modern_headers("tools/call"), call(1, "search", {"query": "x"}), 400, -32020),
        (
            modern_headers("tools/call", "get_ticket"),
            call(1, "search", {"query": "x"}),
            400,
            -32020,
        ),
        (
            modern_headers("tools/call", "=?base64?c2VhcmNo?="),
            call(1, "search", {"query": "x"}),
            200,
            None,
        ),
        (
            {**POST_HEADERS, "mcp-protocol-version": MODERN},
            request(1, "server/discover", {"_meta": meta()}),
            400,
            -32020,
        ),
        (
            modern_headers("tools/list"),
            request(1, "tools/list", {"_meta": meta("2099-01-01")}),
            400,
            -32020,
        ),
        (
            modern_headers("tools/list", version="2099-01-01"),
            request(1, "tools/list", {"_meta": meta("2099-01-01")}),
            400,
            -32022,
        ),
        (modern_headers("tools/list"), request(1, "tools/list", {}), 400, -32602),
        (
            modern_headers("prompts/list"),
            request(1, "prompts/list", {"_meta": meta()}),
            404,
            -32601,
        ),
        (modern_headers("tools/call", "nope"), call(1, "nope", {}), 400, -32602),
        (modern_headers("initialize"), initialize(1), 400, -32600),
    ],
    ids=[
        "method-mismatch",
        "name-missing",
        "name-mismatch",
        "name-sentinel-ok",
        "method-missing",
        "version-header-differs",
        "version-unsupported",
        "meta-missing",
        "method-not-found",
        "unknown-tool",
        "initialize-on-modern",
    ],
)
async def test_modern_error_statuses(
    tickets: int, headers: dict[str, str], body: dict[str, object], status: int, code: int | None
) -> None:
    with trio.fail_after(20):
        reply = await http(tickets, "POST", headers, body)
        assert reply.status == status, reply
        payload = reply.json()
        assert payload["id"] == 1
        if code is None:
            assert "result" in payload
        else:
            assert payload["error"]["code"] == code
            if code == -32022:
                assert MODERN in payload["error"]["data"]["supported"]


async def test_transport_level_refusals(tickets: int) -> None:
    with trio.fail_after(20):
        for method in ("GET", "DELETE"):
            reply = await http(tickets, method, {"mcp-protocol-version": MODERN})
            assert reply.status == 405 and reply.headers["allow"] == "POST"
        body = request(1, "server/discover", {"_meta": meta()})
        json_only = {**modern_headers("server/discover"), "accept": "application/json"}
        assert (await http(tickets, "POST", json_only, body)).status == 406
        text = {**modern_headers("server/discover"), "content-type": "text/plain"}
        assert (await http(tickets, "POST", text, body)).status == 415
        evil = {**modern_headers("server/discover"), "origin": "http://evil.example"}
        assert (await http(tickets, "POST", evil, body)).status == 403
        local = {**modern_headers("server/discover"), "origin": "http://localhost:3000"}
        assert (await http(tickets, "POST", local, body)).status == 200
        note = {"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"_meta": meta()}}
        assert (
            await http(tickets, "POST", modern_headers("notifications/whatever"), note)
        ).status == 202
        garbage = await http(tickets, "POST", modern_headers("tools/list"), b"{oops")
        assert garbage.status == 400 and garbage.json()["error"]["code"] == -32700


async def test_legacy_session_flow(tickets: int) -> None:
    with trio.fail_after(20):
        init = await http(tickets, "POST", POST_HEADERS, initialize(1))
        assert init.status == 200
        assert init.json()["result"]["protocolVersion"] == "2025-11-25"
        sid = init.headers["mcp-session-id"]
        session = {**POST_HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}

        assert (await http(tickets, "POST", session, INITIALIZED)).status == 202
        listed = (await http(tickets, "POST", session, request(2, "tools/list"))).json()["result"]
        assert len(listed["tools"]) == 2 and "resultType" not in listed
        assert (await http(tickets, "POST", session, request(3, "ping"))).json()["result"] == {}

        search = request(
            4,
            "tools/call",
            {"name": "search", "arguments": {"query": "csv"}, "_meta": {"progressToken": 4}},
        )
        events = (await http(tickets, "POST", session, search)).events()
        assert [e.get("method") for e in events] == ["notifications/progress", None]
        assert "T-2" in text_of(events[-1])

        missing = await http(tickets, "POST", POST_HEADERS, request(5, "tools/list"))
        assert missing.status == 400 and missing.json()["error"]["code"] == -32600
        unknown = await http(
            tickets, "POST", {**POST_HEADERS, "mcp-session-id": "nope"}, request(6, "tools/list")
        )
        assert unknown.status == 404

        assert (await http(tickets, "DELETE", {"mcp-session-id": sid})).status == 200
        gone = await http(tickets, "POST", session, request(7, "tools/list"))
        assert gone.status == 404
        assert (await http(tickets, "DELETE", {"mcp-session-id": sid})).status == 404


async def test_closing_the_connection_cancels_a_modern_request(custom: int) -> None:
    with trio.fail_after(20):
        async with HttpConn.open(custom) as conn:
            status, head = await conn.start(
                "POST", modern_headers("tools/call", "sleep"), call(1, "sleep", {}, progressToken=1)
            )
            assert status == 200 and head["content-type"] == "text/event-stream"
            assert (await conn.next_event())["method"] == "notifications/progress"
        # The connection is closed: the server must notice and cancel the call.
        reply = await http(
            custom,
            "POST",
            modern_headers("tools/call", "cancelled"),
            call(2, "cancelled", {"count": 1}),
        )
        assert json.loads(text_of(reply.json())) == [1]


async def test_legacy_cancel_notification_ends_the_request(custom: int) -> None:
    with trio.fail_after(20):
        init = await http(custom, "POST", POST_HEADERS, initialize(1))
        session = {**POST_HEADERS, "mcp-session-id": init.headers["mcp-session-id"]}
        async with HttpConn.open(custom) as conn:
            sleep = request(
                2, "tools/call", {"name": "sleep", "arguments": {}, "_meta": {"progressToken": 2}}
            )
            status, _ = await conn.start("POST", session, sleep)
            assert status == 200
            assert (await conn.next_event())["method"] == "notifications/progress"
            assert (await http(custom, "POST", session, cancel(2))).status == 202
            # The stream ends without an answer to the cancelled request.
            assert await conn.chunk() is None


async def test_deleting_a_session_ends_its_streams(custom: int) -> None:
    with trio.fail_after(20):
        init = await http(custom, "POST", POST_HEADERS, initialize(1))
        sid = init.headers["mcp-session-id"]
        async with HttpConn.open(custom) as conn:
            status, head = await conn.start(
                "GET", {"accept": "text/event-stream", "mcp-session-id": sid}
            )
            assert status == 200 and head["content-type"] == "text/event-stream"
            grow = request(2, "tools/call", {"name": "grow", "arguments": {"name": "extra"}})
            await http(custom, "POST", {**POST_HEADERS, "mcp-session-id": sid}, grow)
            assert (await conn.next_event())["method"] == "notifications/tools/list_changed"
            assert (await http(custom, "DELETE", {"mcp-session-id": sid})).status == 200
            assert await conn.chunk() is None


async def test_modern_listen_stream(custom: int) -> None:
    with trio.fail_after(20):
        async with HttpConn.open(custom) as conn:
            listen = request(
                "L",
                "subscriptions/listen",
                {"_meta": meta(), "notifications": {"toolsListChanged": True}},
            )
            status, _ = await conn.start("POST", modern_headers("subscriptions/listen"), listen)
            assert status == 200
            ack = await conn.next_event()
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            await http(
                custom,
                "POST",
                modern_headers("tools/call", "shrink"),
                call(1, "shrink", {"name": "boom"}),
            )
            changed = await conn.next_event()
            assert changed["method"] == "notifications/tools/list_changed"
            assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L"


async def test_sigterm_stops_the_server_while_a_client_stopped_reading(tmp_path: Path) -> None:
    with trio.fail_after(20):
        async with spawn_http_child(CUSTOM, tmp_path) as child, HttpConn.open(child.port) as conn:
            flood = call(1, "flood", {"count": 1000, "size": 10_000}, progressToken=1)
            status, _ = await conn.start("POST", modern_headers("tools/call", "flood"), flood)
            assert status == 200
            assert (await conn.next_event())["method"] == "notifications/progress"
            # Megabytes of events are queued behind this one, and nobody reads them.
            child.proc.terminate()
            assert await child.proc.wait() == 0
