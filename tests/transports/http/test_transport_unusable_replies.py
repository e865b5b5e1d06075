"""A Streamable HTTP server's response that answers a request but cannot be taken (both a
result and an error, an id like ``1.0`` or ``"1"``): the request it answered fails at
once with the reason stdio gives, whichever stream it came on (the request's own reply,
another request's event stream, the push stream), and the rest goes on. A sound one sent
in response to another request fails its request the same way; one on the push stream
is its request's answer, and what comes for that request after it is a duplicate."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio

from protocol.http.parts import ResponseHead
from protocol.jsonrpc.reply_faults import MalformedReply
from tests.support.http_servers.serving import (
    LegacySession,
    Responder,
    SeenRequest,
    event,
    result,
    serve_http,
)
from transports.http.connection import HttpConnection
from transports.http.transport import HttpTransport, open_http_transport

LIMIT = 10
# Far under any time limit a caller sets: the answer came, it is only unusable.
AT_ONCE = 1.0
LEGACY = {"MCP-Protocol-Version": "2025-11-25"}


def unusable(rid: int, how: str) -> dict[str, Any]:
    if how == "sound":  # only where another request's reply carries it
        return result(rid, {})
    if how == "float id":
        return result(float(rid), {})
    if how == "string id":
        return result(str(rid), {})
    return result(rid, {}) | {"error": {"code": -32000, "message": "no"}}


WHY = {
    "float id": "sent under the id {rid}.0 (not an integer) for request {rid}",
    "string id": 'sent under the id "{rid}" (a string) for request {rid}',
    "both members": "both a result and an error (JSON-RPC allows one)",
}
HOWS = list(WHY)
# In response to another request, a sound response for one in flight fails it too: it
# cannot be told which of the two it answers.
ELSEWHERE = {**WHY, "sound": "sent in response to tools/call (id {carrier})"}


def reason(how: str, rid: int, carrier: int = 2) -> str:
    return f"a: the reply was {ELSEWHERE[how].format(rid=rid, carrier=carrier)} and was dropped"


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("shape", ["json", "sse"])
async def test_a_requests_own_reply_that_cannot_be_taken_fails_it(
    how: str, shape: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        params = req.message.get("params") or {}
        reply = unusable(req.rpc_id, how) if params.get("bad") else result(req.rpc_id, {})
        if shape == "json":
            await respond.json(reply)
        else:
            await respond.sse(event(reply))

    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.http"):
        async with serve_http(handler) as srv, open_http_transport("a", srv.url()) as t:
            with trio.fail_after(AT_ONCE), pytest.raises(MalformedReply) as info:
                await t.request("tools/call", {"bad": True})
            assert info.value.reason == reason(how, 1)
            assert bytes(await t.request("tools/call", {})) == b"{}"
    assert warnings(caplog) == [
        f"{reason(how, 1)}; the request (id 1) it answered failed, the server keeps running"
    ]


@pytest.mark.parametrize("how", ELSEWHERE)
async def test_one_on_another_requests_stream_fails_the_request_it_answered(
    how: str, caplog: pytest.LogCaptureFixture
) -> None:
    first_sent = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_id == 1:
            first_sent.set()
            await respond.sse_start()
            await respond.wait_disconnect()  # its answer goes out on the other stream
        else:
            await respond.sse(event(unusable(1, how)), event(result(req.rpc_id, {"own": 1})))

    failed: list[MalformedReply] = []
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.http"):
        async with (
            serve_http(handler) as srv,
            open_http_transport("a", srv.url()) as t,
            trio.open_nursery() as nursery,
        ):

            async def first() -> None:
                with pytest.raises(MalformedReply) as info:
                    await t.request("tools/call", {"n": 1})
                failed.append(info.value)

            nursery.start_soon(first)
            await first_sent.wait()
            with trio.fail_after(AT_ONCE):
                assert json.loads(bytes(await t.request("tools/call", {"n": 2}))) == {"own": 1}
    [error] = failed
    assert error.reason == reason(how, 1)
    assert warnings(caplog) == [
        f"{reason(how, 1)}; the request (id 1) it answered failed, the server keeps running"
    ]


async def handshake(t: HttpTransport) -> None:
    t.reset_session()
    t.era = "legacy"
    await t.request("initialize", {"protocolVersion": "2025-11-25"}, cancellable=False)
    await t.notify("notifications/initialized", None, headers=LEGACY)


@pytest.mark.parametrize("how", HOWS)
async def test_one_on_the_push_stream_fails_the_call_it_answered(how: str) -> None:
    called = trio.Event()
    call_ids: list[int] = []

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "GET":
            await respond.sse_start()
            await called.wait()
            await respond.send(event(unusable(call_ids[0], how)))
            await respond.wait_disconnect()
        elif req.message["params"].get("held"):
            call_ids.append(req.rpc_id)
            called.set()
            await respond.sse_start()
            await respond.wait_disconnect()
        else:
            await respond.json(result(req.rpc_id, {"fine": True}))

    with trio.fail_after(LIMIT):
        async with (
            serve_http(LegacySession(handler)) as srv,
            open_http_transport("a", srv.url()) as t,
            trio.open_nursery() as nursery,
        ):
            await handshake(t)
            nursery.start_soon(t.listen)
            with trio.fail_after(AT_ONCE * 2), pytest.raises(MalformedReply) as info:
                await t.request("tools/call", {"held": True}, headers=LEGACY)
            assert info.value.reason == reason(how, call_ids[0])
            # Its answer came: the server is not told the call was given up.
            assert "notifications/cancelled" not in srv.methods()
            raw = await t.request("tools/call", {}, headers=LEGACY)
            assert json.loads(bytes(raw)) == {"fine": True}
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("how", ELSEWHERE)
async def test_one_in_another_requests_json_reply_fails_both_as_unreadable(
    how: str, caplog: pytest.LogCaptureFixture
) -> None:
    first_sent = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_id == 1:
            first_sent.set()
            await respond.sse_start()
            await respond.wait_disconnect()  # its answer goes out in the other's reply
        else:
            await respond.json(unusable(1, how))

    failed: list[MalformedReply] = []
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.http"):
        async with (
            serve_http(handler) as srv,
            open_http_transport("a", srv.url()) as t,
            trio.open_nursery() as nursery,
        ):

            async def first() -> None:
                with trio.fail_after(AT_ONCE), pytest.raises(MalformedReply) as info:
                    await t.request("tools/call", {"n": 1})
                failed.append(info.value)

            nursery.start_soon(first)
            await first_sent.wait()
            # The second got no answer of its own: the server answered, unreadably (not
            # an outage the breaker would count).
            with trio.fail_after(AT_ONCE), pytest.raises(MalformedReply) as info:
                await t.request("tools/call", {"n": 2})
    second = "a: the reply was the answer to another request in flight and was dropped"
    assert info.value.reason == second
    [error] = failed
    assert error.reason == reason(how, 1)
    assert warnings(caplog) == [
        f"{reason(how, 1)}; the request (id 1) it answered failed, the server keeps running",
        f"{second}; the request (id 2) it answered failed, the server keeps running",
    ]


async def test_a_json_answer_stands_against_a_bad_one_while_its_connection_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first_in = trio.Event()
    started_second = trio.Event()
    sent_first = trio.Event()
    second_done = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_id == 1:
            first_in.set()
            await started_second.wait()
            await respond.json(result(1, {"good": 1}), headers={"Connection": "close"})
            sent_first.set()
        else:
            await respond.sse_start()
            started_second.set()
            await sent_first.wait()
            await respond.send(event(unusable(1, "both members")))
            await respond.send(event(result(req.rpc_id, {"own": 2})))
            await respond.end()

    # The answer's connection is closed before the request ends: hold that close until
    # the bad duplicate has come on the other stream.
    close = HttpConnection.aclose
    to_hold = [True]  # the first close only: the answer's connection

    async def aclose(self: HttpConnection) -> None:
        if to_hold:
            to_hold.clear()
            with trio.move_on_after(AT_ONCE):
                await second_done.wait()
        await close(self)

    monkeypatch.setattr(HttpConnection, "aclose", aclose)
    answers: list[object] = []
    with trio.fail_after(LIMIT):
        async with (
            serve_http(handler) as srv,
            open_http_transport("a", srv.url()) as t,
            trio.open_nursery() as nursery,
        ):

            async def first() -> None:
                answers.append(json.loads(bytes(await t.request("tools/call", {"n": 1}))))

            nursery.start_soon(first)
            await first_in.wait()
            assert json.loads(bytes(await t.request("tools/call", {"n": 2}))) == {"own": 2}
            second_done.set()
    assert answers == [{"good": 1}]


def reading_through_cancels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The calling task's reply is read even once its wait was ended, up to its first
    chunk that holds an error: as when that came in with the push stream's answer, both
    together, and was read before the call's task saw the cancel."""
    next_chunk, read_body = HttpConnection.next_chunk, HttpConnection.read_body
    receive_head = HttpConnection.receive_head
    caller = trio.lowlevel.current_task()
    held: list[bool] = []

    async def shielded_chunk(self: HttpConnection) -> bytes | None:
        if held or trio.lowlevel.current_task() is not caller:
            return await next_chunk(self)
        with trio.CancelScope(shield=True):
            chunk = await next_chunk(self)
        if chunk is not None and b'"error"' in chunk:
            held.append(True)
        return chunk

    async def shielded_body(self: HttpConnection, *args: Any, **kwargs: Any) -> bytes:
        if trio.lowlevel.current_task() is not caller:
            return await read_body(self, *args, **kwargs)
        with trio.CancelScope(shield=True):
            return await read_body(self, *args, **kwargs)

    async def shielded_head(self: HttpConnection) -> ResponseHead:
        if held or trio.lowlevel.current_task() is not caller:
            return await receive_head(self)
        with trio.CancelScope(shield=True):
            return await receive_head(self)

    monkeypatch.setattr(HttpConnection, "receive_head", shielded_head)
    monkeypatch.setattr(HttpConnection, "next_chunk", shielded_chunk)
    monkeypatch.setattr(HttpConnection, "read_body", shielded_body)


@pytest.mark.parametrize("later", ["push", "sse", "json", "none", "sse read", "json read"])
async def test_a_response_kept_from_the_push_stream_is_the_calls_answer(
    later: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After its answer on the push stream the call ends, whatever comes for it after
    # (a bad one there or on its own stream) or while its own stream stays quiet; so
    # too when its own bad reply was already being read.
    if later.endswith(" read"):
        reading_through_cancels(monkeypatch)
    called, pushed = trio.Event(), trio.Event()
    call_ids: list[int] = []

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "GET":
            await respond.sse_start()
            await called.wait()
            await respond.send(event(result(call_ids[0], {"via": "push"})))
            if later == "push":
                await respond.send(event(unusable(call_ids[0], "both members")))
            pushed.set()
            await respond.wait_disconnect()
        elif req.message["params"].get("held"):
            call_ids.append(req.rpc_id)
            called.set()
            bad = unusable(req.rpc_id, "both members")
            if later.startswith("json"):
                await pushed.wait()
                return await respond.json(bad)
            await respond.sse_start()
            if later.startswith("sse"):
                await pushed.wait()
                await respond.send(event(bad))
            await respond.wait_disconnect()
        else:
            await respond.json(result(req.rpc_id, {"fine": True}))

    with trio.fail_after(LIMIT):
        async with (
            serve_http(LegacySession(handler)) as srv,
            open_http_transport("a", srv.url()) as t,
            trio.open_nursery() as nursery,
        ):
            await handshake(t)
            nursery.start_soon(t.listen)
            with trio.fail_after(AT_ONCE):
                raw = await t.request("tools/call", {"held": True}, headers=LEGACY)
            assert json.loads(bytes(raw)) == {"via": "push"}
            # Its answer came: the server is not told the call was given up.
            assert "notifications/cancelled" not in srv.methods()
            raw = await t.request("tools/call", {}, headers=LEGACY)
            assert json.loads(bytes(raw)) == {"fine": True}
            nursery.cancel_scope.cancel()
