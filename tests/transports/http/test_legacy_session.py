"""Legacy sessions (Mcp-Session-Id, expiry, DELETE) and cancellation in both eras."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests.support.http_servers.serving import (
    Responder,
    SeenRequest,
    error,
    event,
    result,
    serve_http,
)
from transports.errors import HttpRPCError, SessionExpired, TransportError
from transports.http.params import HttpParams
from transports.http.transport import HttpTransport, open_http_transport

LIMIT = 10
LEGACY = {"MCP-Protocol-Version": "2025-11-25"}


class LegacyServer:
    """A session-keeping server in the style of the TS and Python SDKs."""

    def __init__(self, *, unknown_session: str = "404", delete_status: int = 200) -> None:
        self.sessions: set[str] = set()
        self.minted = 0
        self.unknown_session = unknown_session
        self.delete_status = delete_status

    async def __call__(self, req: SeenRequest, respond: Responder) -> None:
        sid = req.header("mcp-session-id")
        if req.method == "DELETE":
            self.sessions.discard(sid or "")
            await respond.reply(self.delete_status)
            return
        if req.rpc_method == "initialize":
            self.minted += 1
            new = f"session-{self.minted}"
            self.sessions.add(new)
            await respond.sse(
                "id: p\ndata: \n\n",
                event(result(req.rpc_id, {"protocolVersion": "2025-11-25"})),
                headers={"Mcp-Session-Id": new},
            )
        elif sid is None:
            await respond.json(
                error("server-error", -32600, "Bad Request: Missing session ID"), 400
            )
        elif sid not in self.sessions:
            if self.unknown_session == "404":
                await respond.json(error(None, -32600, "Session not found"), 404)
            else:
                # server-everything: 400, -32000, and no "id" member at all.
                body = (
                    '{"jsonrpc":"2.0","error":{"code":-32000,'
                    '"message":"Bad Request: No valid session ID provided"}}'
                )
                await respond.reply(400, body, {"Content-Type": "application/json"})
        elif req.rpc_id is None:
            await respond.reply(202)
        else:
            await respond.json(result(req.rpc_id, {"session": sid}))


async def initialize(t: HttpTransport) -> None:
    await t.request(
        "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}, cancellable=False
    )
    await t.notify("notifications/initialized", None, headers=LEGACY)


async def test_session_id_is_captured_and_echoed() -> None:
    server = LegacyServer()
    with trio.fail_after(LIMIT):
        async with serve_http(server) as srv, open_http_transport("old", srv.url()) as t:
            assert t.session_id is None
            await initialize(t)
            assert t.session_id == "session-1"
            raw = await t.request("tools/list", {}, headers=LEGACY)
            assert bytes(raw) == b'{"session": "session-1"}'
    init, initialized, tools_list, delete = srv.requests
    assert init.header("mcp-session-id") is None
    assert initialized.header("mcp-session-id") == "session-1"
    assert initialized.header("mcp-protocol-version") == "2025-11-25"
    assert tools_list.header("mcp-session-id") == "session-1"
    assert delete.method == "DELETE"
    assert delete.body == b""
    assert delete.header("mcp-session-id") == "session-1"
    assert delete.header("mcp-protocol-version") == "2025-11-25"
    assert server.sessions == set()


async def test_a_session_id_on_a_reply_other_than_initialize_changes_nothing() -> None:
    # A server handing out a new id with each call's reply: requests would leave the
    # push stream's session behind, and the ended ones would never be ended.
    server = LegacyServer()

    async def rotating(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "tools/list":
            server.minted += 1
            new = f"session-{server.minted}"
            server.sessions.add(new)
            await respond.json(result(req.rpc_id, {}), headers={"Mcp-Session-Id": new})
            return
        await server(req, respond)

    with trio.fail_after(LIMIT):
        async with serve_http(rotating) as srv, open_http_transport("old", srv.url()) as t:
            await initialize(t)
            for _ in range(2):
                await t.request("tools/list", {}, headers=LEGACY)
            assert t.session_id == "session-1"
    assert [r.header("mcp-session-id") for r in srv.requests[1:]] == ["session-1"] * 4


@pytest.mark.parametrize("style", ["404", "400"])
async def test_expired_session(style: str) -> None:
    server = LegacyServer(unknown_session=style)
    with trio.fail_after(LIMIT):
        async with serve_http(server) as srv, open_http_transport("old", srv.url()) as t:
            await initialize(t)
            server.sessions.clear()  # the server restarted or timed the session out
            with pytest.raises(SessionExpired, match="no longer knows our session"):
                await t.request("tools/list", {}, headers=LEGACY)
            assert t.session_id is None
            # What the caller does next: initialize again and retry once.
            await initialize(t)
            assert t.session_id == "session-2"
            await t.request("tools/list", {}, headers=LEGACY)
    assert srv.requests[-2].header("mcp-session-id") == "session-2"


async def test_notification_on_an_expired_session() -> None:
    server = LegacyServer()
    with trio.fail_after(LIMIT):
        async with serve_http(server) as srv, open_http_transport("old", srv.url()) as t:
            await initialize(t)
            server.sessions.clear()
            with pytest.raises(SessionExpired):
                await t.notify("notifications/initialized", None, headers=LEGACY)


async def test_nothing_but_the_handshake_goes_until_a_lost_session_is_set_up_again() -> None:
    # A message sent without the session would be refused by a sessionful server, its
    # error taken for the request's own answer.
    server = LegacyServer()
    with trio.fail_after(LIMIT):
        async with serve_http(server) as srv, open_http_transport("old", srv.url()) as t:
            await initialize(t)
            server.sessions.clear()
            with pytest.raises(SessionExpired, match="no longer knows our session"):
                await t.request("tools/list", {}, headers=LEGACY)
            assert t.session_lost
            seen = len(srv.requests)
            with pytest.raises(SessionExpired, match="tools/list was not sent"):
                await t.request("tools/list", {}, headers=LEGACY)
            await t.request("initialize", {"protocolVersion": "2025-11-25"}, cancellable=False)
            assert t.session_id == "session-2" and t.session_lost
            # Not before the server heard that the handshake is done.
            with pytest.raises(SessionExpired, match="ping was not sent"):
                await t.request("ping", {}, headers=LEGACY)
            assert srv.methods()[seen:] == ["initialize"]
            await t.notify("notifications/initialized", None, headers=LEGACY)
            assert not t.session_lost
            raw = await t.request("tools/list", {}, headers=LEGACY)
            assert bytes(raw) == b'{"session": "session-2"}'


async def test_a_session_refused_as_missing_after_one_was_handed_out_is_lost() -> None:
    # The server handed out a session and then a new handshake handed out none; its
    # "Missing session ID" says it lost the session, and is no answer to the request.
    server = LegacyServer()

    async def forgetting(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "initialize" and server.minted:
            await respond.json(result(req.rpc_id, {"protocolVersion": "2025-11-25"}))
        elif req.rpc_method == "notifications/initialized":
            await respond.reply(202)
        else:
            await server(req, respond)

    with trio.fail_after(LIMIT):
        async with serve_http(forgetting) as srv, open_http_transport("old", srv.url()) as t:
            await initialize(t)
            t.reset_session()
            await initialize(t)
            assert t.session_id is None and not t.session_lost
            with pytest.raises(SessionExpired, match="Missing session ID"):
                await t.request("tools/list", {}, headers=LEGACY)
            assert t.session_lost
    assert srv.requests[-1].header("mcp-session-id") is None


async def test_missing_session_without_one_is_an_rpc_error_for_era_detection() -> None:
    # A modern probe to a legacy server: no session was sent, so this is not expiry.
    with trio.fail_after(LIMIT):
        async with serve_http(LegacyServer()) as srv, open_http_transport("old", srv.url()) as t:
            with pytest.raises(HttpRPCError) as info:
                await t.request("server/discover", {"_meta": {}})
    assert (info.value.code, info.value.http_status) == (-32600, 400)
    assert srv.methods() == ["server/discover"]  # and no DELETE: there was no session


async def test_404_without_a_session_is_not_expiry() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.json(error(req.rpc_id, -32601, "Method not found"), 404)

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv, open_http_transport("new", srv.url()) as t:
            with pytest.raises(HttpRPCError) as info:
                await t.request("tools/list", {})
    assert (info.value.code, info.value.http_status) == (-32601, 404)


async def test_reset_session_forgets_the_id_and_sends_nothing_but_a_handshake() -> None:
    with trio.fail_after(LIMIT):
        async with serve_http(LegacyServer()) as srv, open_http_transport("old", srv.url()) as t:
            await initialize(t)
            t.reset_session()
            assert t.session_id is None and t.session_lost
            with pytest.raises(SessionExpired, match="tools/list was not sent"):
                await t.request("tools/list", {}, headers=LEGACY)
    assert "DELETE" not in srv.methods()
    assert "tools/list" not in srv.methods()


@pytest.mark.parametrize("status", [405, 404, 500])
async def test_delete_answers_do_not_fail_the_close(status: int) -> None:
    with trio.fail_after(LIMIT):
        async with serve_http(LegacyServer(delete_status=status)) as srv:
            async with open_http_transport("old", srv.url()) as t:
                await initialize(t)
            assert t.session_id is None
    assert srv.methods()[-1] == "DELETE"


async def test_delete_is_bounded_when_the_server_hangs() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "DELETE":
            await respond.wait_disconnect()
        else:
            await respond.json(result(req.rpc_id, {}), headers={"Mcp-Session-Id": "abc"})

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv, open_http_transport("old", srv.url()) as t:
            await t.request("initialize", {})
    assert srv.methods() == ["initialize", "DELETE"]


async def test_session_ids_from_error_replies_and_bad_ids_are_ignored() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "probe":
            # The Python SDK attaches a fresh session id even to this 400.
            await respond.json(
                error(None, -32600, "Missing session ID"), 400, {"Mcp-Session-Id": "junk"}
            )
        else:
            await respond.json(result(req.rpc_id, {}), headers={"Mcp-Session-Id": "bad id"})

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv, open_http_transport("a", srv.url()) as t:
            with pytest.raises(HttpRPCError):
                await t.request("probe", {})
            await t.request("initialize", {})
            assert t.session_id is None


async def test_modern_cancellation_closes_the_stream() -> None:
    started = trio.Event()
    hung_up = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "tools/call":
            await respond.sse_start()
            await respond.send("id: 1\ndata: \n\n")
            started.set()
            await respond.wait_disconnect()
            hung_up.set()
        else:
            await respond.json(result(req.rpc_id, "after"))

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv, open_http_transport("new", srv.url()) as t:
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    await t.request("tools/call", {"name": "slow"})

                nursery.start_soon(call)
                await started.wait()
                nursery.cancel_scope.cancel()
            await hung_up.wait()
            assert bytes(await t.request("tools/list", {})) == b'"after"'
    assert srv.methods() == ["tools/call", "tools/list"]
    assert srv.connections == 2


async def _cancel_a_legacy_call(cancellable: bool) -> tuple[list[SeenRequest], Any]:
    server = LegacyServer()
    started = trio.Event()
    hung_up = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "tools/call":
            await respond.sse_start()
            started.set()
            await respond.wait_disconnect()
            hung_up.set()
        else:
            await server(req, respond)

    call_id: Any = None
    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv, open_http_transport("old", srv.url()) as t:
            await initialize(t)
            t.era = "legacy"
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:

                    async def call() -> None:
                        await t.request(
                            "tools/call", {"name": "slow"}, headers=LEGACY, cancellable=cancellable
                        )

                    nursery.start_soon(call)
                    await started.wait()
                    call_id = srv.requests[-1].rpc_id
                    scope.cancel()
            await hung_up.wait()
            await t.request("tools/list", {}, headers=LEGACY)
    return srv.requests, call_id


async def test_legacy_cancellation_sends_notifications_cancelled() -> None:
    requests, call_id = await _cancel_a_legacy_call(cancellable=True)
    methods = [r.rpc_method or r.method for r in requests]
    assert methods == [
        "initialize",
        "notifications/initialized",
        "tools/call",
        "notifications/cancelled",
        "tools/list",
        "DELETE",
    ]
    cancel = requests[3]
    assert cancel.message["params"] == {"requestId": call_id, "reason": "cancelled by the client"}
    assert "id" not in cancel.message
    assert cancel.header("mcp-session-id") == "session-1"
    assert cancel.header("mcp-protocol-version") == "2025-11-25"


async def test_legacy_request_marked_not_cancellable_sends_nothing() -> None:
    requests, _ = await _cancel_a_legacy_call(cancellable=False)
    assert "notifications/cancelled" not in [r.rpc_method for r in requests]


async def test_cancel_before_sending_sends_nothing() -> None:
    gate = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        await gate.wait()
        await respond.json(result(req.rpc_id, None))

    with trio.fail_after(LIMIT):
        async with (
            serve_http(handler) as srv,
            open_http_transport("old", srv.url(), HttpParams(pool_size=1)) as t,
        ):
            t.era = "legacy"
            async with trio.open_nursery() as nursery:
                nursery.start_soon(t.request, "first", {})
                await trio.testing.wait_all_tasks_blocked()
                with trio.CancelScope() as scope:
                    scope.cancel()
                    await t.request("queued", {})  # waits for the only connection
                gate.set()
    assert srv.methods() == ["first"]


async def test_failed_cancel_notification_is_not_raised() -> None:
    started = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "notifications/cancelled":
            await respond.reply(500)
        else:
            await respond.sse_start()
            started.set()
            await respond.wait_disconnect()

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv, open_http_transport("old", srv.url()) as t:
            t.era = "legacy"
            async with trio.open_nursery() as nursery:
                nursery.start_soon(t.request, "tools/call", {})
                await started.wait()
                nursery.cancel_scope.cancel()
    assert srv.methods() == ["tools/call", "notifications/cancelled"]


def test_http_errors_are_transport_errors() -> None:
    assert issubclass(SessionExpired, TransportError)


async def test_version_header_for_messages_sent_without_one() -> None:
    server = LegacyServer()
    with trio.fail_after(LIMIT):
        async with serve_http(server) as srv, open_http_transport("old", srv.url()) as t:
            with pytest.raises(HttpRPCError):  # the modern probe a legacy server refuses
                await t.request(
                    "server/discover", {}, headers={"MCP-Protocol-Version": "2026-07-28"}
                )
            t.reset_session()  # what the caller does before the legacy handshake
            await t.request("initialize", {"protocolVersion": "2025-11-25"}, cancellable=False)
            await t.notify("notifications/initialized", None)
            await t.request("tools/list", {}, headers=LEGACY)
            await t.notify("notifications/roots/list_changed", None)
    versions = [(r.rpc_method or r.method, r.header("mcp-protocol-version")) for r in srv.requests]
    assert versions == [
        ("server/discover", "2026-07-28"),
        ("initialize", None),
        ("notifications/initialized", None),  # the version is not known to the transport yet
        ("tools/list", "2025-11-25"),
        ("notifications/roots/list_changed", "2025-11-25"),
        ("DELETE", "2025-11-25"),
    ]
