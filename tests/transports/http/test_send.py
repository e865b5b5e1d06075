"""How every HTTP message goes out: along redirects that stay on the server's origin."""

from __future__ import annotations

import pytest
import trio

from tests.support.http_servers import Responder, SeenRequest, result, serve_http
from transports.errors import TransportError, UnexpectedReply
from transports.http.transport import open_http_transport

LIMIT = 10


async def answer_json(req: SeenRequest, respond: Responder) -> None:
    await respond.json(result(req.rpc_id, {"echo": req.rpc_method}))


async def test_redirects_307_and_308() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.target == "/mcp/":
            await respond.reply(307, "moved", {"Location": f"http://127.0.0.1:{srv.port}/mcp"})
        elif req.target == "/perm":
            await respond.reply(308, headers={"Location": "/mcp?x=1"})
        elif req.target == "/dir/rel":
            await respond.reply(307, headers={"Location": "../mcp"})
        else:
            await answer_json(req, respond)

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            async with open_http_transport("a", srv.url("/mcp/")) as t:
                await t.request("x", {})
                await t.request("x", {})
            assert [r.target for r in srv.requests] == ["/mcp/", "/mcp", "/mcp/", "/mcp"]
            assert srv.requests[1].body == srv.requests[0].body
            assert srv.connections == 1
            srv.requests.clear()
            async with open_http_transport("a", srv.url("/perm")) as t:
                await t.request("x", {})
                await t.request("x", {})
                assert t.url.endswith("/mcp?x=1")
            # A permanent redirect is remembered.
            assert [r.target for r in srv.requests] == ["/perm", "/mcp?x=1", "/mcp?x=1"]
            srv.requests.clear()
            async with open_http_transport("a", srv.url("/dir/rel")) as t:
                await t.request("x", {})
            assert [r.target for r in srv.requests] == ["/dir/rel", "/mcp"]


async def test_redirect_loop_and_foreign_redirects_are_refused() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.target == "/away":
            await respond.reply(307, headers={"Location": "http://example.com/mcp"})
        elif req.target == "/nowhere":
            await respond.reply(307)
        else:
            await respond.reply(307, headers={"Location": req.target + "x"})

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            async with open_http_transport("a", srv.url("/loop")) as t:
                with pytest.raises(TransportError, match="more than 5 redirects"):
                    await t.request("x", {})
            assert len(srv.requests) == 6
            async with open_http_transport("a", srv.url("/away")) as t:
                with pytest.raises(UnexpectedReply, match="another origin"):
                    await t.request("x", {})
            async with open_http_transport("a", srv.url("/nowhere")) as t:
                with pytest.raises(UnexpectedReply, match="without a Location"):
                    await t.request("x", {})
