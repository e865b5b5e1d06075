"""An HTTP+SSE server's reply that names more than one request: a JSON-RPC batch of
responses, or a response that gives its ``"id"`` more than once, on the event stream
or in a POST's own reply. Each request it names that waits fails at once, with the
reason stdio gives and a warning naming it; no request it does not name fails, and the
transport stays open for the next. The transport sets no time limit of its own: a
request such a reply left waiting would wait past the test's, which is what fails it."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio

from protocol.jsonrpc.reply_faults import MalformedReply
from tests.support.http_servers.legacy_sse import (
    Message,
    OnMessage,
    Session,
    answer,
    serve_legacy_sse,
    sse_event,
)
from tests.support.http_servers.serving import Responder, SeenRequest, serve_http
from transports.sse.transport import LegacySSETransport, open_legacy_sse_transport

LIMIT = 10
BATCH = "sent in a JSON-RPC batch (an array of messages, which is not taken)"


def batch(*ids: int) -> str:
    return json.dumps([{"jsonrpc": "2.0", "id": rid, "result": {}} for rid in ids])


def twice(*ids: int) -> str:
    given = "".join(f'"id":{rid},' for rid in ids)
    return f'{{"jsonrpc":"2.0",{given}"result":{{}}}}'


def twice_why(*ids: int) -> str:
    return f'sent with more than one "id" ({", ".join(map(str, ids))})'


def reason(why: str) -> str:
    return f"old: the reply was {why} and was dropped"


def failed_warning(why: str, rid: int) -> str:
    return f"{reason(why)}; the request (id {rid}) it answered failed, the server keeps running"


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def call(t: LegacySSETransport, name: str) -> Any:
    return json.loads(bytes(await t.request("tools/call", {"name": name, "arguments": {}})))


async def fails(t: LegacySSETransport, name: str, into: list[str]) -> None:
    with pytest.raises(MalformedReply) as info:
        await call(t, name)
    into.append(info.value.reason)


def naming_held(form: str, held: int) -> tuple[OnMessage, list[int]]:
    """A server that holds the calls to "held" unanswered and, once ``held`` of them
    came, answers them in one message on its stream: a batch naming each (and an id no
    request has), or one response giving the first's id and that one; everything else
    as it should. The ids of the held calls come with it."""
    ids: list[int] = []

    async def server_side(session: Session, msg: Message) -> None:
        if msg.get("params", {}).get("name") != "held":
            return await answer(session, msg)
        ids.append(msg["id"])
        if len(ids) == held:
            data = batch(*ids, 99) if form == "batch" else twice(ids[0], 99)
            await session.send_raw(sse_event(data))

    return server_side, ids


@pytest.mark.parametrize(("form", "held"), [("batch", 2), ("twice", 1)])
async def test_one_on_the_stream_fails_each_waiting_request_it_names(
    form: str, held: int, caplog: pytest.LogCaptureFixture
) -> None:
    server_side, ids = naming_held(form, held)
    reasons: list[str] = []
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.sse"):
        async with (
            serve_legacy_sse(server_side) as srv,
            open_legacy_sse_transport("old", srv.url()) as t,
        ):
            async with trio.open_nursery() as nursery:
                for _ in range(held):
                    nursery.start_soon(fails, t, "held", reasons)
            assert await call(t, "echo") == {"content": [{"type": "text", "text": ""}]}
            assert t.error is None
    why = BATCH if form == "batch" else twice_why(ids[0], 99)
    assert reasons == [reason(why)] * held
    assert sorted(warnings(caplog)) == sorted(failed_warning(why, rid) for rid in ids)


@pytest.mark.parametrize("form", ["batch", "twice"])
async def test_one_in_a_posts_reply_fails_each_waiting_request_it_names(
    form: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The second ping's POST is answered with a message naming it, the first (which
    # waits on the stream) and an id no request has.
    posted: list[int] = []
    first_in = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "GET":
            await respond.sse_start()
            await respond.send(sse_event("/messages", event="endpoint"))
            await respond.wait_disconnect()
            return
        posted.append(req.rpc_id)
        if len(posted) == 1:
            first_in.set()
            return await respond.reply(202, "Accepted")
        ids = (req.rpc_id, posted[0], 99)
        data = batch(*ids) if form == "batch" else twice(*ids)
        await respond.reply(200, data, {"Content-Type": "application/json"})

    async def ping(into: list[str]) -> None:
        with pytest.raises(MalformedReply) as info:
            await t.request("ping", None)
        into.append(info.value.reason)

    reasons: list[str] = []
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.sse"):
        async with serve_http(handler) as http, open_legacy_sse_transport("old", http.url()) as t:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ping, reasons)
                await first_in.wait()
                await ping(reasons)
            assert t.error is None
    why = BATCH if form == "batch" else twice_why(posted[1], posted[0], 99)
    assert reasons == [reason(why)] * 2
    assert sorted(warnings(caplog)) == sorted(failed_warning(why, rid) for rid in posted)
