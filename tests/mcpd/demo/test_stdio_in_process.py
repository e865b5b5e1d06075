"""The demo runtime's stdio connection over memory streams: lines in, one writer out,
requests that run side by side and may be cancelled, and the end of input (its
grace, the subscriptions it ends, a client that stops reading)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from mcpd.demo.runtime import DemoServer, ToolContext, ToolDef, object_schema
from mcpd.demo.stdio import serve_stdio
from tests.support.clients.demo import call, cancel, initialize, meta, request, text_of

LIMIT = 10
GRACE = 5.0


class Gate:
    """A tool that waits for the test to open it, and the calls it saw end."""

    def __init__(self) -> None:
        self.open = trio.Event()
        self.entered = trio.Event()
        self.cancelled: list[Any] = []


def gated_server(gate: Gate) -> DemoServer:
    server = DemoServer("gated")

    @server.tool("Wait for the gate.")
    async def wait(args: dict[str, Any], ctx: ToolContext) -> str:
        gate.entered.set()
        try:
            await gate.open.wait()
        except trio.Cancelled:
            gate.cancelled.append(ctx.request_id)
            raise
        return "through"

    @server.tool("Say it back.", object_schema({"text": {"type": "string"}}, ["text"]))
    async def echo(args: dict[str, Any], ctx: ToolContext) -> str:
        return str(args["text"])

    return server


class Peer:
    """The client's end: lines written, messages read."""

    def __init__(self, stream: trio.testing.MemoryStreamPair | Any) -> None:
        self.stream = stream
        self.buf = b""

    async def line(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def send(self, msg: dict[str, Any]) -> None:
        await self.line(json.dumps(msg).encode() + b"\n")

    async def recv(self) -> dict[str, Any] | None:
        while b"\n" not in self.buf:
            piece = await self.stream.receive_some()
            if not piece:
                assert self.buf == b""
                return None
            self.buf += piece
        line, self.buf = self.buf.split(b"\n", 1)
        return dict(json.loads(line))

    async def next(self) -> dict[str, Any]:
        msg = await self.recv()
        assert msg is not None
        return msg

    async def ask(self, msg: dict[str, Any]) -> dict[str, Any]:
        await self.send(msg)
        return await self.next()

    async def end_input(self) -> None:
        await self.stream.send_stream.aclose()

    async def rest(self) -> list[dict[str, Any]]:
        out = []
        while (msg := await self.recv()) is not None:
            out.append(msg)
        return out


@asynccontextmanager
async def connected(server: DemoServer, **options: Any) -> AsyncIterator[Peer]:
    client, end = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:

            async def serve() -> None:
                await serve_stdio(server, end, end, **options)
                await end.send_stream.aclose()

            nursery.start_soon(serve)
            yield Peer(client)


def listen(rid: Any) -> dict[str, Any]:
    return request(
        rid, "subscriptions/listen", {"_meta": meta(), "notifications": {"toolsListChanged": True}}
    )


async def test_a_line_over_the_limit_gets_an_error_and_the_connection_serves_on() -> None:
    async with connected(gated_server(Gate()), max_line=400) as peer:
        await peer.send(call(1, "echo", {"text": "x" * 500}))
        refused = await peer.next()
        assert refused["id"] is None
        assert refused["error"]["message"] == "Invalid request: message longer than 400 bytes"
        assert text_of(await peer.ask(call(2, "echo", {"text": "ok"}))) == "ok"
        await peer.end_input()


@pytest.mark.parametrize("line", [b"{oops\n", b"[]\n", b'{"jsonrpc":"2.0","id":1}\n'])
async def test_a_bad_line_gets_an_error_and_the_connection_serves_on(line: bytes) -> None:
    async with connected(gated_server(Gate())) as peer:
        await peer.line(line)
        assert "error" in await peer.next()
        assert text_of(await peer.ask(call(2, "echo", {"text": "ok"}))) == "ok"
        await peer.end_input()


async def test_a_request_id_in_flight_is_refused_and_free_again_once_answered() -> None:
    gate = Gate()
    async with connected(gated_server(gate)) as peer:
        await peer.send(call(1, "wait", {}))
        await gate.entered.wait()
        again = await peer.ask(call(1, "echo", {"text": "no"}))
        assert again == {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": -32600, "message": "Request id 1 is in use"},
        }
        gate.open.set()
        assert text_of(await peer.next()) == "through"
        assert text_of(await peer.ask(call(1, "echo", {"text": "yes"}))) == "yes"
        await peer.end_input()


async def test_a_slow_request_does_not_hold_up_the_others() -> None:
    gate = Gate()
    async with connected(gated_server(gate)) as peer:
        await peer.send(call(1, "wait", {}))
        await gate.entered.wait()
        assert (await peer.ask(call(2, "echo", {"text": "quick"})))["id"] == 2
        gate.open.set()
        assert (await peer.next())["id"] == 1
        await peer.end_input()


async def test_a_cancelled_request_is_never_answered() -> None:
    gate = Gate()
    async with connected(gated_server(gate)) as peer:
        await peer.send(call("w", "wait", {}))
        await gate.entered.wait()
        await peer.send(cancel("w"))
        assert (await peer.ask(call(2, "echo", {"text": "after"})))["id"] == 2
        await peer.end_input()
        assert await peer.rest() == []
    assert gate.cancelled == ["w"]


@pytest.mark.parametrize(
    "params",
    [{"requestId": 2}, {"requestId": [1]}, {"requestId": None}, "nonsense"],
    ids=["other-id", "a-list", "null", "not-an-object"],
)
async def test_a_cancel_naming_no_request_in_flight_cancels_nothing(
    params: Any, caplog: pytest.LogCaptureFixture
) -> None:
    gate = Gate()
    async with connected(gated_server(gate)) as peer:
        await peer.send(call(1, "wait", {}))
        await gate.entered.wait()
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
        # A request behind it is answered: the cancel was read, and cancelled nothing.
        assert (await peer.ask(call(3, "echo", {"text": "x"})))["id"] == 3
        gate.open.set()
        assert text_of(await peer.next()) == "through"
        await peer.end_input()
    assert gate.cancelled == []


async def test_a_clients_responses_and_other_notifications_are_ignored() -> None:
    async with connected(gated_server(Gate())) as peer:
        await peer.send({"jsonrpc": "2.0", "id": 7, "result": {}})
        await peer.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
        assert (await peer.ask(call(2, "echo", {"text": "x"})))["id"] == 2
        await peer.end_input()
        assert await peer.rest() == []


async def test_the_last_line_without_a_newline_is_still_served() -> None:
    async with connected(gated_server(Gate())) as peer:
        await peer.line(json.dumps(call(1, "echo", {"text": "tail"})).encode())
        await peer.end_input()
        (answer,) = await peer.rest()
    assert text_of(answer) == "tail"


async def test_work_running_at_end_of_input_may_finish_within_the_grace() -> None:
    gate = Gate()
    async with connected(gated_server(gate)) as peer:
        await peer.send(call(1, "wait", {}))
        await gate.entered.wait()
        await peer.end_input()
        gate.open.set()
        (answer,) = await peer.rest()
    assert text_of(answer) == "through"


async def test_work_outliving_the_grace_is_cancelled_unanswered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = Gate()
    async with connected(gated_server(gate), eof_grace=GRACE) as peer:
        await peer.send(call(1, "wait", {}))
        await gate.entered.wait()
        start = trio.current_time()
        await peer.end_input()
        assert await peer.rest() == []
        assert trio.current_time() - start == pytest.approx(GRACE)
    assert gate.cancelled == [1]


async def test_subscriptions_end_at_once_at_end_of_input(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with connected(gated_server(Gate()), eof_grace=GRACE) as peer:
        ack = await peer.ask(listen("L"))
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        start = trio.current_time()
        await peer.end_input()
        assert await peer.rest() == []
        assert trio.current_time() == start


async def test_a_legacy_client_hears_of_changes_once_however_often_it_initializes() -> None:
    server = gated_server(Gate())
    async with connected(server) as peer:
        assert "result" in await peer.ask(initialize(1))
        assert "result" in await peer.ask(initialize(2))
        server.add_tool(ToolDef("late", "Late.", object_schema({}), _never))
        assert (await peer.next())["method"] == "notifications/tools/list_changed"
        assert (await peer.ask(call(3, "echo", {"text": "x"})))["id"] == 3
        await peer.end_input()
        assert await peer.rest() == []


async def test_a_failed_initialize_starts_no_announcements() -> None:
    server = gated_server(Gate())
    async with connected(server) as peer:
        failed = await peer.ask(request(1, "initialize", {"protocolVersion": 5}))
        assert "error" in failed
        server.add_tool(ToolDef("late", "Late.", object_schema({}), _never))
        assert (await peer.ask(call(2, "echo", {"text": "x"})))["id"] == 2
        await peer.end_input()
        assert await peer.rest() == []


async def test_a_client_that_closes_its_input_side_of_our_output_stops_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = Gate()
    client, end = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT), caplog.at_level(logging.INFO, "mcpd.demo.stdio"):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_stdio, gated_server(gate), end, end)
            await client.send_all(json.dumps(call(1, "wait", {})).encode() + b"\n")
            await gate.entered.wait()
            await client.receive_stream.aclose()
            await client.send_all(json.dumps(call(2, "echo", {"text": "x"})).encode() + b"\n")
    # serve_stdio returned with input still open: nobody reads, so nothing is worth doing.
    assert gate.cancelled == [1]
    assert "output closed by the client; stopping" in caplog.messages


async def _never(args: dict[str, Any], ctx: ToolContext) -> str:
    raise AssertionError("not called")
