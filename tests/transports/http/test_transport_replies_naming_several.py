"""A Streamable HTTP server's reply that names more than one request: a JSON-RPC batch of
responses, or a response that gives its ``"id"`` more than once. Each request it names
that waits fails at once, with the reason stdio gives and a warning naming it, whichever
stream it came on (a request's JSON reply, its event stream, a legacy session's push
stream); no request it does not name fails, and the next request is answered. The
transport sets no time limit of its own here: a request such a reply left waiting would
wait past the test's, which is what fails it."""

from __future__ import annotations

import json
import logging

import pytest
import trio

from protocol.jsonrpc.reply_faults import MalformedReply
from tests.support.http_servers.serving import (
    LegacySession,
    Responder,
    SeenRequest,
    result,
    serve_http,
)
from transports.http.transport import HttpTransport, open_http_transport

LIMIT = 10
LEGACY = {"MCP-Protocol-Version": "2025-11-25"}
BATCH = "sent in a JSON-RPC batch (an array of messages, which is not taken)"


def batch(*ids: int) -> bytes:
    return json.dumps([result(rid, {}) for rid in ids]).encode()


def twice(*ids: int) -> bytes:
    given = "".join(f'"id":{rid},' for rid in ids)
    return f'{{"jsonrpc":"2.0",{given}"result":{{}}}}'.encode()


def twice_why(*ids: int) -> str:
    return f'sent with more than one "id" ({", ".join(map(str, ids))})'


def reason(why: str) -> str:
    return f"a: the reply was {why} and was dropped"


def failed_warning(why: str, rid: int) -> str:
    return f"{reason(why)}; the request (id {rid}) it answered failed, the server keeps running"


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def send(respond: Responder, shape: str, data: bytes) -> None:
    """``data`` as the reply's JSON body, or as the one event of its stream."""
    if shape == "json":
        await respond.reply(200, data, {"Content-Type": "application/json"})
    else:
        await respond.sse(b"event: message\ndata: " + data + b"\n\n")


async def fails(t: HttpTransport, params: dict[str, object], into: list[str]) -> None:
    with pytest.raises(MalformedReply) as info:
        await t.request("tools/call", params, headers=LEGACY)
    into.append(info.value.reason)


@pytest.mark.parametrize("form", ["batch", "twice"])
@pytest.mark.parametrize("shape", ["json", "sse"])
async def test_one_in_a_requests_reply_fails_each_waiting_request_it_names(
    form: str, shape: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The second request's reply names itself first, then the first request, held open.
    held: list[int] = []
    holding = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        params = req.message.get("params") or {}
        if params.get("held"):
            held.append(req.rpc_id)
            holding.set()
            await respond.sse_start()
            await respond.wait_disconnect()
        elif params.get("bad"):
            ids = (req.rpc_id, held[0])
            await send(respond, shape, batch(*ids, 99) if form == "batch" else twice(*ids))
        else:
            await respond.json(result(req.rpc_id, {"fine": True}))

    reasons: list[str] = []
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.http"):
        async with serve_http(handler) as srv, open_http_transport("a", srv.url()) as t:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(fails, t, {"held": True}, reasons)
                await holding.wait()
                await fails(t, {"bad": True}, reasons)
            raw = await t.request("tools/call", {})
            assert json.loads(bytes(raw)) == {"fine": True}
    why = BATCH if form == "batch" else twice_why(2, 1)
    assert reasons == [reason(why)] * 2
    assert sorted(warnings(caplog)) == [failed_warning(why, 1), failed_warning(why, 2)]


@pytest.mark.parametrize("shape", ["json", "sse"])
async def test_a_response_giving_its_id_twice_fails_the_request_it_names(
    shape: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if (req.message.get("params") or {}).get("bad"):
            await send(respond, shape, twice(req.rpc_id, 99))
        else:
            await respond.json(result(req.rpc_id, {"fine": True}))

    reasons: list[str] = []
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.http"):
        async with serve_http(handler) as srv, open_http_transport("a", srv.url()) as t:
            await fails(t, {"bad": True}, reasons)
            raw = await t.request("tools/call", {})
            assert json.loads(bytes(raw)) == {"fine": True}
    assert reasons == [reason(twice_why(1, 99))]
    assert warnings(caplog) == [failed_warning(twice_why(1, 99), 1)]


async def handshake(t: HttpTransport) -> None:
    t.reset_session()
    t.era = "legacy"
    await t.request("initialize", {"protocolVersion": "2025-11-25"}, cancellable=False)
    await t.notify("notifications/initialized", None, headers=LEGACY)


@pytest.mark.parametrize("form", ["batch", "twice"])
async def test_one_on_the_push_stream_fails_each_waiting_call_it_names(
    form: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A batch names both calls held open; a response giving its id twice names the
    # first and one no request has.
    holding = 2 if form == "batch" else 1
    call_ids: list[int] = []
    called = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "GET":
            await respond.sse_start()
            await called.wait()
            data = batch(*call_ids) if form == "batch" else twice(call_ids[0], 99)
            await respond.send(b"event: message\ndata: " + data + b"\n\n")
            await respond.wait_disconnect()
        elif req.message["params"].get("held"):
            call_ids.append(req.rpc_id)
            if len(call_ids) == holding:
                called.set()
            await respond.sse_start()
            await respond.wait_disconnect()
        else:
            await respond.json(result(req.rpc_id, {"fine": True}))

    reasons: list[str] = []
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.http"):
        async with (
            serve_http(LegacySession(handler)) as srv,
            open_http_transport("a", srv.url()) as t,
            trio.open_nursery() as listening,
        ):
            await handshake(t)
            listening.start_soon(t.listen)
            async with trio.open_nursery() as nursery:
                for _ in range(holding):
                    nursery.start_soon(fails, t, {"held": True}, reasons)
            # Their answers came: the server is not told the calls were given up.
            assert "notifications/cancelled" not in srv.methods()
            raw = await t.request("tools/call", {}, headers=LEGACY)
            assert json.loads(bytes(raw)) == {"fine": True}
            listening.cancel_scope.cancel()
    why = BATCH if form == "batch" else twice_why(call_ids[0], 99)
    assert reasons == [reason(why)] * holding
    assert sorted(warnings(caplog)) == sorted(failed_warning(why, rid) for rid in call_ids)
