"""Setting up again a legacy session the server forgot: one handshake for all the
requests that found it gone, whose failure each of them is told of; the next request
begins another."""

from __future__ import annotations

from typing import Any

import trio

from mcpd.servers.connected.upstream import Upstream
from tests.support.http_servers.serving import (
    LegacySession,
    Responder,
    SeenRequest,
    result,
    serve_http,
)
from transports.errors import SessionExpired
from transports.http.transport import open_http_transport

LIMIT = 10


class Server:
    """A sessionful legacy server whose ``initialize`` fails (503, after a while) while
    ``down``."""

    def __init__(self) -> None:
        self.down = False
        self.initializes = 0
        self.session = LegacySession(self.handle, strict=True)

    async def __call__(self, req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "initialize":
            self.initializes += 1
            if self.down:
                await trio.sleep(0.2)  # while the others find the session gone too
                await respond.reply(503, "Service Unavailable")
                return
        await self.session(req, respond)

    async def handle(self, req: SeenRequest, respond: Responder) -> None:
        if req.method == "GET":
            await respond.reply(405)
        else:
            await trio.sleep(0.05)
            await respond.json(result(req.rpc_id, {"tools": []}))


async def test_requests_that_found_the_session_gone_share_one_failed_handshake() -> None:
    server = Server()
    failures: list[SessionExpired] = []

    async def list_tools(up: Upstream) -> Any:
        try:
            await up.request("tools/list", None)
        except SessionExpired as exc:
            failures.append(exc)

    with trio.fail_after(LIMIT):
        async with serve_http(server) as web, open_http_transport("s", web.url()) as t:
            up = Upstream("s", t, http=True, era="legacy")
            await up.connect()
            async with trio.open_nursery() as nursery:
                up.nursery = nursery
                server.session.forgets = 1
                server.down = True
                async with trio.open_nursery() as requests:
                    for _ in range(3):
                        requests.start_soon(list_tools, up)
                assert len(failures) == 3
                assert server.initializes == 2  # at connect, and once for the three
                for exc in failures:
                    assert "setting up a new one failed" in exc.reason, exc.reason
                    assert "503" in exc.reason, exc.reason
                # The next request begins another, which works now.
                server.down = False
                await up.request("tools/list", None)
                assert server.initializes == 3
                nursery.cancel_scope.cancel()
    assert {status for status, _ in server.session.refused} <= {404}


async def test_a_request_waits_for_the_handshake_within_its_own_deadline() -> None:
    server = Server()
    with trio.fail_after(LIMIT):
        async with serve_http(server) as web, open_http_transport("s", web.url()) as t:
            up = Upstream("s", t, http=True, era="legacy")
            await up.connect()
            async with trio.open_nursery() as nursery:
                up.nursery = nursery
                server.session.forgets = 1
                slow = trio.Event()

                async def stalled(req: SeenRequest, respond: Responder) -> None:
                    if req.rpc_method == "initialize":
                        await slow.wait()
                    await server(req, respond)

                web.handler = stalled
                with trio.move_on_after(0.2) as gave_up:
                    await up.request("tools/list", None)
                assert gave_up.cancelled_caught
                # The handshake goes on for the requests that come next.
                slow.set()
                await up.request("tools/list", None)
                assert server.initializes == 2
                nursery.cancel_scope.cancel()
