"""How every HTTP message goes out: with the credentials an ``AuthHook`` hands out
(sent again when a refusal brings new ones, once for each kind of refusal), and
along redirects that stay on the server's origin."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from tests.support.http_servers.serving import Responder, SeenRequest, result, serve_http
from transports.base import AuthHook
from transports.errors import AuthError, TransportError, UnexpectedReply
from transports.http.params import HttpParams
from transports.http.transport import open_http_transport

LIMIT = 10


async def answer_json(req: SeenRequest, respond: Responder) -> None:
    await respond.json(result(req.rpc_id, {"echo": req.rpc_method}))


class Hook(AuthHook):
    """Hands out ``values`` in turn: the first before each message, the next when the
    server refuses one (None: let the refusal stand)."""

    def __init__(self, *values: str | None) -> None:
        self.values = list(values)
        self.refusals: list[tuple[int, str, str | None]] = []
        self.refused_from: list[str | None] = []
        self.accepted_values: list[str | None] = []

    async def authorization(self) -> str | None:
        return self.values[0]

    async def refused(self, error: AuthError, sent: str | None) -> str | None:
        self.refusals.append((error.status, error.challenge, sent))
        self.refused_from.append(error.peer)
        self.values.pop(0)
        return self.values[0] if self.values else None

    async def refused_again(self, error: AuthError, sent: str | None) -> None:
        self.refusals.append((error.status, error.challenge, sent))

    def accepted(self, sent: str | None) -> None:
        self.accepted_values.append(sent)


def refusing(*good: str) -> Any:
    """A server that takes only the Authorization values ``good``."""

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.header("authorization") in good:
            await answer_json(req, respond)
        else:
            await respond.reply(401, "", {"WWW-Authenticate": 'Bearer error="invalid_token"'})

    return handler


async def test_the_hooks_value_goes_with_every_message_in_place_of_a_configured_one() -> None:
    hook = Hook("Bearer t1")
    with trio.fail_after(LIMIT):
        async with (
            serve_http(refusing("Bearer t1")) as srv,
            open_http_transport(
                "a", srv.url(), HttpParams(headers={"Authorization": "Bearer old"}), auth=hook
            ) as t,
        ):
            await t.request("x", {})
            await t.notify("notifications/initialized", None)
    assert [r.header("authorization") for r in srv.requests] == ["Bearer t1", "Bearer t1"]
    assert all(r.header_names().count("authorization") == 1 for r in srv.requests)
    assert hook.accepted_values == ["Bearer t1", "Bearer t1"]


async def test_a_refusal_that_brings_a_new_value_sends_the_message_once_more() -> None:
    hook = Hook("Bearer expired", "Bearer fresh")
    with trio.fail_after(LIMIT):
        async with (
            serve_http(refusing("Bearer fresh")) as srv,
            open_http_transport("a", srv.url(), auth=hook) as t,
        ):
            raw = await t.request("tools/call", {"name": "x"})
    assert json.loads(bytes(raw)) == {"echo": "tools/call"}
    sent = [(r.rpc_method, r.header("authorization")) for r in srv.requests]
    assert sent == [("tools/call", "Bearer expired"), ("tools/call", "Bearer fresh")]
    assert hook.refusals == [(401, 'Bearer error="invalid_token"', "Bearer expired")]
    assert hook.accepted_values == ["Bearer fresh"]


async def test_a_refusal_says_which_address_it_came_from() -> None:
    """The server's name may resolve to several addresses; what a 401 asks for is
    weighed by the one that answered."""
    hook = Hook("Bearer a")
    with trio.fail_after(LIMIT):
        async with (
            serve_http(refusing()) as srv,
            open_http_transport("a", f"http://localhost:{srv.port}/mcp", auth=hook) as t,
        ):
            with pytest.raises(AuthError) as caught:
                await t.request("x", {})
    assert caught.value.peer == "127.0.0.1"
    assert hook.refused_from == ["127.0.0.1"]


@pytest.mark.parametrize("values", [("Bearer a",), ("Bearer a", "Bearer b")])
async def test_a_refusal_stands_when_the_hook_has_nothing_better(
    values: tuple[str, ...],
) -> None:
    hook = Hook(*values)
    with trio.fail_after(LIMIT):
        async with (
            serve_http(refusing()) as srv,
            open_http_transport("a", srv.url(), auth=hook) as t,
        ):
            with pytest.raises(AuthError) as caught:
                await t.request("x", {})
    assert caught.value.status == 401
    # Never sent more than twice: once, and once more with a new value.
    assert len(srv.requests) == len(values)
    assert hook.accepted_values == []


def short_of_scope(good: str) -> Any:
    """A server that takes only ``good``, and finds every other token (bar none) short
    of a scope."""

    async def handler(req: SeenRequest, respond: Responder) -> None:
        value = req.header("authorization")
        if value == good:
            await answer_json(req, respond)
        elif value is None:
            await respond.reply(401, "", {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        else:
            challenge = 'Bearer error="insufficient_scope", scope="more"'
            await respond.reply(403, "", {"WWW-Authenticate": challenge})

    return handler


async def test_a_token_then_a_scope_refused_sends_the_message_with_each_answer() -> None:
    hook = Hook(None, "Bearer narrow", "Bearer wide")
    with trio.fail_after(LIMIT):
        async with (
            serve_http(short_of_scope("Bearer wide")) as srv,
            open_http_transport("a", srv.url(), auth=hook) as t,
        ):
            raw = await t.request("tools/call", {"name": "x"})
    assert json.loads(bytes(raw)) == {"echo": "tools/call"}
    assert [r.header("authorization") for r in srv.requests] == [
        None,
        "Bearer narrow",
        "Bearer wide",
    ]
    assert hook.accepted_values == ["Bearer wide"]


async def test_each_kind_of_refusal_is_answered_once_then_stands() -> None:
    hook = Hook(None, "Bearer narrow", "Bearer still-narrow", "Bearer never-sent")
    with trio.fail_after(LIMIT):
        async with (
            serve_http(short_of_scope("Bearer wide")) as srv,
            open_http_transport("a", srv.url(), auth=hook) as t,
        ):
            with pytest.raises(AuthError) as caught:
                await t.request("x", {})
    assert caught.value.status == 403
    assert [r.header("authorization") for r in srv.requests] == [
        None,
        "Bearer narrow",
        "Bearer still-narrow",
    ]
    assert [status for status, _, _ in hook.refusals] == [401, 403, 403]


async def test_a_value_no_header_can_carry_is_never_sent() -> None:
    hook = Hook("Bearer a\r\nX-Injected: 1")
    with trio.fail_after(LIMIT):
        async with (
            serve_http(answer_json) as srv,
            open_http_transport("a", srv.url(), auth=hook) as t,
        ):
            with pytest.raises(TransportError, match="cannot be sent in an HTTP header"):
                await t.request("x", {})
    assert srv.requests == []


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
