"""One agent connection's outbox over a real socket pair: lines in the order they
were put, a batch answered in one line, a broken line never reaching the agent, and
an agent that stops reading or hangs up ending its connection alone."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from mcpd.agents.connection.outbox import Outbox
from mcpd.agents.daemon_seam import Lines
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.result_pieces import BrokenPiece
from transports import chunks, linewriter

LINES = Lines(writer=linewriter.LineWriter, batch=chunks.batch, receive=chunks.receive)


def note(n: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "n": n}).encode()


def result(rid: int, value: object = None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"v": value}}).encode()


class AgentEnd:
    """The agent's end of the socket: what mcpd wrote, line by line."""

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self._buf = b""

    async def line(self) -> Any:
        with trio.fail_after(10):
            while b"\n" not in self._buf:
                data = await self.sock.recv(1 << 16)
                assert data, "the connection ended"
                self._buf += data
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)


class Box:
    """An outbox, its agent's end, and what the outbox told its connection."""

    def __init__(self, stream: trio.SocketStream, agent: AgentEnd) -> None:
        self.agent = agent
        self.closed = 0
        self.outbox = Outbox(LINES, stream, "agent 7", self._close)

    def _close(self) -> None:
        self.closed += 1


@asynccontextmanager
async def outbox(run: bool = True) -> AsyncIterator[Box]:
    ours, theirs = trio.socket.socketpair()
    stream = trio.SocketStream(ours)
    box = Box(stream, AgentEnd(theirs))
    try:
        async with trio.open_nursery() as nursery:
            if run:
                nursery.start_soon(box.outbox.run)
            yield box
            nursery.cancel_scope.cancel()
    finally:
        stream.socket.close()
        theirs.close()


async def test_lines_reach_the_agent_in_the_order_they_were_put() -> None:
    async with outbox() as box:
        box.outbox.put(note(1), None)
        box.outbox.put(result(1), 1)
        box.outbox.put(note(2), None)
        assert [(await box.agent.line()).get("n", "result") for _ in range(3)] == [
            1,
            "result",
            2,
        ]


async def test_a_batch_is_answered_in_one_line_once_every_answer_is_in() -> None:
    async with outbox() as box:
        batch = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in (1, 2, 3)]
        sent: list[bytes] = []
        run = box.outbox.batches.start(json.dumps(batch).encode(), (), sent.append)
        assert len(run) == 3 and sent == []
        box.outbox.put(result(2, "two"), 2)
        box.outbox.put(note(1), None)  # not of the batch: goes at once
        assert (await box.agent.line())["n"] == 1
        box.outbox.put(result(1, "one"), 1)
        box.outbox.unbatch(3)  # cancelled: the batch is whole without it
        line = await box.agent.line()
        assert [(m["id"], m["result"]["v"]) for m in line] == [(2, "two"), (1, "one")]
        # An id answered after its batch went is an ordinary answer.
        box.outbox.put(result(3), 3)
        assert (await box.agent.line())["id"] == 3


@pytest.mark.parametrize(
    "broken",
    [
        b'{"jsonrpc":"2.0","id":5,"result":{}}\n{"jsonrpc":"2.0","id":6,"result":{}}',
        b'{"jsonrpc":"2.0","id":5,"result":{}}\r',
        b'{"jsonrpc":"2.0","id":5,"result":',
        b"",
    ],
)
async def test_a_broken_answer_never_reaches_the_agent_but_an_error_does(
    broken: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    async with outbox() as box:
        with caplog.at_level(logging.ERROR, logger="mcpd.agents"):
            box.outbox.put(broken, 5)
            box.outbox.put(broken, None)  # a notification: dropped
        box.outbox.put(note(9), None)
        error = await box.agent.line()
        assert error["id"] == 5 and error["error"]["code"] == rpc.INTERNAL_ERROR
        assert "could not deliver" in error["error"]["message"]
        assert (await box.agent.line())["n"] == 9
    assert box.closed == 0
    first, second = caplog.records
    assert "to agent 7" in first.getMessage() and "answered with an error" in first.getMessage()
    assert second.getMessage().endswith("dropped)")


def pieces(box: Box, count: int, broken_at: int | None = None) -> Iterator[bytes]:
    """A tools/list made piece by piece, the outbox used meanwhile as a request would."""
    yield b'{"jsonrpc":"2.0","id":1,"result":{"tools":['
    for i in range(count):
        if i == 1:
            box.outbox.put(note(100), None)  # while the reply is being written
        if i == broken_at:
            raise BrokenPiece("not valid JSON")
        yield (b"," if i else b"") + json.dumps({"name": f"t{i}"}).encode()
    yield b"]}}"


async def test_a_line_put_during_a_long_reply_waits_behind_it() -> None:
    async with outbox() as box:
        await box.outbox.long.send(pieces(box, 3))
        reply = await box.agent.line()
        assert [t["name"] for t in reply["result"]["tools"]] == ["t0", "t1", "t2"]
        assert (await box.agent.line())["n"] == 100
        assert box.outbox.long.held is None


async def test_a_long_reply_broken_half_way_ends_the_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with outbox() as box:
        with caplog.at_level(logging.ERROR, logger="mcpd.agents"):
            await box.outbox.long.send(pieces(box, 5, broken_at=3))
    assert box.closed == 1
    [record] = caplog.records
    assert "half-way" in record.getMessage() and "agent 7" in record.getMessage()


async def test_an_agent_that_stops_reading_is_closed_after_the_write_timeout(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with outbox(run=False) as box:
        line = result(1, "x" * (1 << 20))
        for rid in range(16):  # far more than the socket's buffers hold
            box.outbox.put(line, rid)
        start = trio.current_time()
        with caplog.at_level(logging.WARNING, logger="mcpd.agents"), trio.fail_after(120):
            await box.outbox.run()
        assert trio.current_time() - start == pytest.approx(30.0)
        assert box.outbox.out.closed
        # What is put after it ended is not queued without end.
        box.outbox.put(line, 99)
        assert box.outbox.out.queued < 16 * len(line)
    assert box.closed == 1
    [record] = caplog.records
    assert (
        record.getMessage()
        == "agent 7 stopped reading its replies for 30 s; closing its connection"
    )


async def test_an_agent_that_hangs_up_ends_the_connection_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with outbox(run=False) as box:
        box.agent.sock.close()
        with caplog.at_level(logging.DEBUG, logger="mcpd.agents"), trio.fail_after(10):
            box.outbox.put(result(1), 1)
            await box.outbox.run()
    assert box.closed == 1 and caplog.records == []
