"""A server's streams read within its pace: a stream waits for room until another
completes its message, and a server flooding any transport with notifications is
read more slowly, shown as held back (and said so in the journal, once), while its
own request is still answered after the flood; what taking apart what a server sent
took, answers included, is measured."""

from __future__ import annotations

import json
import logging
import sys

import pytest
import trio
import trio.testing

from protocol.jsonrpc import messages as rpc
from tests.support.http_servers.legacy_sse import (
    Message,
    Session,
    answer,
    serve_legacy_sse,
    sse_event,
)
from tests.support.http_servers.serving import (
    Responder,
    SeenRequest,
    event,
    notification,
    result,
    serve_http,
)
from transports.base import Transport
from transports.http.params import HttpParams
from transports.http.transport import open_http_transport
from transports.read_pace import ReadPace
from transports.sse.transport import open_legacy_sse_transport
from transports.stdio.params import StdioParams
from transports.stdio.transport import open_stdio_transport

LIMIT = 20
# Within the budget below (4,000 at once, then 1,000 a second) these notes cost some
# 4,600 units, read in well under the time their cost over the burst takes to pay.
RATE = 1000
NOTES = 500
NOTE = notification("notifications/message", {"level": "info", "data": "x" * 2000})

FLOODING_CHILD = f"""
import json, sys
note = json.dumps({NOTE!r}) + "\\n"
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("method") == "flood":
        sys.stdout.write(note * {NOTES})
    sys.stdout.write(json.dumps({{"jsonrpc": "2.0", "id": msg["id"], "result": {{}}}}) + "\\n")
    sys.stdout.flush()
"""


async def test_a_stream_waits_for_room_until_another_completes_its_message() -> None:
    pace = ReadPace("s", max_held=1000)
    read: list[str] = []
    with pace.stream() as a, pace.stream() as b, pace.stream() as c:
        await a.before_read(600)
        await b.before_read(600)  # past the bound: one stream may go on past it

        async def third() -> None:
            await c.before_read(10)
            read.append("c")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(third)
            await trio.testing.wait_all_tasks_blocked()
            assert read == []
            held = pace.held_back
            assert held is not None and "messages not yet complete" in held.reason
            await b.before_read(0)  # its message is complete
        assert read == ["c"]


class Flood:
    """Counts the notes a transport hands on, and sees whether the server was held back
    by the time the last of them came."""

    def __init__(self) -> None:
        self.transport: Transport | None = None
        self.notes = 0
        self.held_when_done = False

    def __call__(self, msg: rpc.Notification) -> None:
        self.notes += 1
        if self.notes == NOTES and self.transport is not None:
            self.held_when_done = self.transport.held_back is not None


def check(flood: Flood, t: Transport, caplog: pytest.LogCaptureFixture) -> None:
    assert flood.notes == NOTES
    assert flood.held_when_done
    held = t.held_back
    assert held is not None and "answers no request" in held.reason
    said = [r for r in caplog.records if getattr(r, "mcpd_event", None) == "held_back"]
    assert len(said) == 1
    assert said[0].getMessage().startswith("s: reading held back: it sends more than mcpd reads")
    assert t.read_work > 0.0  # what taking it all apart took of mcpd's thread


async def test_a_stdio_server_flooding_notifications_is_held_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flood = Flood()
    params = StdioParams(command=sys.executable, args=("-c", FLOODING_CHILD), read_budget=RATE)
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.transport"):
        async with open_stdio_transport("s", params, on_notification=flood) as t:
            flood.transport = t
            assert t.held_back is None
            assert json.loads(bytes(await t.request("flood", {}))) == {}
            check(flood, t, caplog)


async def test_a_call_stream_flooded_with_notifications_is_held_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.sse(event(NOTE) * NOTES, event(result(req.rpc_id, {})))

    flood = Flood()
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.transport"):
        async with (
            serve_http(handler) as srv,
            open_http_transport(
                "s", srv.url(), HttpParams(read_budget=RATE), on_notification=flood
            ) as t,
        ):
            flood.transport = t
            assert json.loads(bytes(await t.request("tools/call", {}))) == {}
            check(flood, t, caplog)


async def test_a_call_stream_of_long_comments_is_held_back_as_a_flood_is() -> None:
    # Comments are read only to be thrown away: they cost their bytes all the same.
    comment = ":" + "x" * (64 * 1024 - 1) + "\n"

    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.sse(*[comment] * 20, event(result(req.rpc_id, {})))

    with trio.fail_after(LIMIT):
        async with (
            serve_http(handler) as srv,
            open_http_transport("s", srv.url(), HttpParams(read_budget=RATE)) as t,
        ):
            assert json.loads(bytes(await t.request("tools/call", {}))) == {}
            held = t.held_back
            assert held is not None and "answers no request" in held.reason


async def test_an_http_sse_stream_flooded_with_notifications_is_held_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def on_message(session: Session, msg: Message) -> None:
        if msg.get("method") != "flood":
            await answer(session, msg)
            return
        await session.send_raw(sse_event(json.dumps(NOTE)) * NOTES)
        await session.send(result(msg["id"], {}))

    flood = Flood()
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.transport"):
        async with (
            serve_legacy_sse(on_message) as server,
            open_legacy_sse_transport(
                "s", server.url(), HttpParams(read_budget=RATE), on_notification=flood
            ) as t,
        ):
            flood.transport = t
            assert json.loads(bytes(await t.request("flood", {}))) == {}
            check(flood, t, caplog)


async def test_what_reading_a_json_reply_took_is_measured_though_it_is_free_of_the_pace() -> None:
    big = {"text": "x" * (1 << 20)}

    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.json(result(req.rpc_id, big))

    with trio.fail_after(LIMIT):
        async with (
            serve_http(handler) as srv,
            open_http_transport("s", srv.url(), HttpParams(read_budget=RATE)) as t,
        ):
            assert t.read_work == 0.0
            assert json.loads(bytes(await t.request("tools/list", {}))) == big
            assert t.read_work > 0.0
            assert t.held_back is None


async def test_a_large_answer_in_one_event_read_in_many_pieces_is_not_held_back() -> None:
    # An answer costs nothing to read, however many pieces it comes in.
    big = {"text": "x" * (4 << 20)}

    async def handler(req: SeenRequest, respond: Responder) -> None:
        body = event(result(req.rpc_id, big)).encode()
        await respond.sse_start()
        for at in range(0, len(body), 16 * 1024):
            await respond.send(body[at : at + 16 * 1024])
        await respond.end()

    with trio.fail_after(LIMIT):
        async with (
            serve_http(handler) as srv,
            open_http_transport("s", srv.url(), HttpParams(read_budget=5)) as t,
        ):
            for _ in range(3):
                assert json.loads(bytes(await t.request("tools/list", {}))) == big
            assert t.held_back is None


# A large answer pretty-printed: one event of many ``data`` lines, each of them read on
# its own, far more than the budget below lets through in the test's time.
ROWS = {"rows": [{"i": i} for i in range(2000)]}
TIGHT = HttpParams(read_budget=5)


def lines_of(msg: object) -> list[bytes]:
    text = json.dumps(msg, indent=1)
    assert text.count("\n") > 4 * LIMIT * 5
    return [f"data: {line}\n".encode() for line in text.split("\n")] + [b"\n"]


async def test_a_large_answer_in_one_event_of_many_data_lines_is_not_held_back() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.sse_start()
        for line in lines_of(result(req.rpc_id, ROWS)):
            await respond.send(line)
        await respond.end()

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv, open_http_transport("s", srv.url(), TIGHT) as t:
            for _ in range(2):
                assert json.loads(bytes(await t.request("tools/call", {}))) == ROWS
            assert t.held_back is None


async def test_an_http_sse_answer_in_one_event_of_many_data_lines_is_not_held_back() -> None:
    async def on_message(session: Session, msg: Message) -> None:
        if msg.get("method") != "big":
            await answer(session, msg)
            return
        for line in lines_of(result(msg["id"], ROWS)):
            await session.send_raw(line)

    with trio.fail_after(LIMIT):
        async with (
            serve_legacy_sse(on_message) as server,
            open_legacy_sse_transport("s", server.url(), TIGHT) as t,
        ):
            for _ in range(2):
                assert json.loads(bytes(await t.request("big", {}))) == ROWS
            assert t.held_back is None


async def test_a_burst_of_requests_relayed_during_a_call_is_not_held_back() -> None:
    # An agent answers them, at its own pace: mcpd posts back what it was given. Their
    # reading is paced, within a burst they fit in.
    asked = 50

    async def on_message(session: Session, msg: Message) -> None:
        if msg.get("method") != "fan_out":
            await answer(session, msg)
            return
        for n in range(asked):
            await session.send({"jsonrpc": "2.0", "id": f"ask{n}", "method": "sampling/x"})
        for n in range(asked):
            await session.wait_for(lambda m, n=n: m.get("id") == f"ask{n}")
        await session.send(result(msg["id"], {}))

    async def relay(req: rpc.Request) -> object:
        return {"asked": req.method}

    with trio.fail_after(LIMIT):
        async with (
            serve_legacy_sse(on_message) as server,
            open_legacy_sse_transport("s", server.url(), HttpParams(read_budget=50)) as t,
        ):
            t.on_request = relay
            assert json.loads(bytes(await t.request("fan_out", {}))) == {}
            assert all("result" in m for m in server.session.received if "ask" in str(m.get("id")))
            assert t.held_back is None
