"""A stdio server's call lines put on its stdin only once there is room (``CallLines``),
on a real pipe the test reads or leaves full: the order calls go in, a call given up
before any of its line was written never reaching the server, one that cannot be made
failing alone, and ``checked_line`` keeping broken lines from the child."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
import trio

from protocol.jsonrpc import messages as rpc
from transports.linewriter import LineWriter
from transports.stdio.call_lines import CallLines, checked_line

LIMIT = 10
BIG = b'"' + b"x" * 300_000 + b'"'  # more than a pipe holds


class Stdin:
    """The child's stdin as a test holds it: the writer's end and the reading end."""

    def __init__(self, writer: LineWriter, reader: trio.lowlevel.FdStream) -> None:
        self.writer = writer
        self.reader = reader
        self.failed: list[tuple[rpc.Id, str]] = []
        self.lines = CallLines(writer, lambda rid, exc: self.failed.append((rid, exc.message)))
        self._buf = b""

    async def read_lines(self, count: int) -> list[bytes]:
        while self._buf.count(b"\n") < count:
            self._buf += await self.reader.receive_some(1 << 20)
        *lines, self._buf = self._buf.split(b"\n", count)
        return lines


@asynccontextmanager
async def stdin(limit: int) -> AsyncIterator[Stdin]:
    r, w = os.pipe()
    reader, sender = trio.lowlevel.FdStream(r), trio.lowlevel.FdStream(w)
    writer = LineWriter(sender, sender.fileno(), limit=limit)
    with trio.fail_after(LIMIT):
        async with reader, sender, trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            yield Stdin(writer, reader)
            writer.close()
            nursery.cancel_scope.cancel()


def call(rid: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call"}).encode()


def maker(made: list[int], rid: int) -> Callable[[], bytes]:
    def make() -> bytes:
        made.append(rid)
        return call(rid)

    return make


async def test_with_room_a_call_is_made_and_written_at_once() -> None:
    made: list[int] = []
    async with stdin(limit=1024) as pipe:
        pipe.lines.wait(1, maker(made, 1))
        assert made == [1]
        assert not pipe.lines.waiting
        assert pipe.writer.on_room is None
        assert await pipe.read_lines(1) == [call(1)]


async def test_while_the_server_does_not_read_calls_wait_and_go_in_order_once_it_does() -> None:
    made: list[int] = []
    async with stdin(limit=1024) as pipe:
        pipe.writer.put(BIG)
        for rid in (1, 2, 3):
            pipe.lines.wait(rid, maker(made, rid))
        # Nothing of them is made while the backlog is over the bound.
        assert made == []
        assert pipe.lines.waiting
        assert await pipe.read_lines(4) == [BIG, call(1), call(2), call(3)]
    assert made == [1, 2, 3]


async def test_a_call_given_up_while_waiting_is_never_made_or_written() -> None:
    made: list[int] = []
    async with stdin(limit=1024) as pipe:
        pipe.writer.put(BIG)
        pipe.lines.wait(1, maker(made, 1))
        pipe.lines.wait(2, maker(made, 2))
        assert pipe.lines.take_back(1)
        assert not pipe.lines.take_back(1)
        assert await pipe.read_lines(2) == [BIG, call(2)]
    assert made == [2]


async def test_a_call_queued_but_not_begun_is_taken_back_whole() -> None:
    async with stdin(limit=1 << 30) as pipe:
        pipe.writer.put(BIG)  # the pipe is full: what follows is queued behind
        pipe.lines.queue(1, call(1))
        pipe.lines.queue(2, call(2))
        assert pipe.lines.take_back(1)
        assert await pipe.read_lines(2) == [BIG, call(2)]
        # Written: too late to take back.
        assert not pipe.lines.take_back(2)


async def test_a_call_written_at_once_cannot_be_taken_back() -> None:
    async with stdin(limit=1024) as pipe:
        pipe.lines.queue(1, call(1))
        assert not pipe.lines.take_back(1)
        assert not pipe.lines.take_back(99)
        assert await pipe.read_lines(1) == [call(1)]


async def test_a_call_whose_line_cannot_be_made_fails_alone() -> None:
    made: list[int] = []

    def broken() -> bytes:
        raise rpc.RPCError(rpc.INTERNAL_ERROR, "cannot make it")

    async with stdin(limit=1024) as pipe:
        pipe.writer.put(BIG)
        pipe.lines.wait(1, maker(made, 1))
        pipe.lines.wait(2, broken)
        pipe.lines.wait(3, maker(made, 3))
        assert await pipe.read_lines(3) == [BIG, call(1), call(3)]
    assert pipe.failed == [(2, "cannot make it")]
    assert made == [1, 3]


async def test_cleared_calls_are_never_made() -> None:
    made: list[int] = []
    async with stdin(limit=1024) as pipe:
        pipe.writer.put(BIG)
        pipe.lines.wait(1, maker(made, 1))
        pipe.lines.clear()
        assert not pipe.lines.waiting
        pipe.writer.put(b"{}")
        assert await pipe.read_lines(2) == [BIG, b"{}"]
    assert made == []


def test_a_sound_line_is_passed_as_it_is() -> None:
    line = call(1)
    assert checked_line("notes", line, "a call") is line


@pytest.mark.parametrize(
    ("line", "fault"),
    [(b'{"a":\n1}', "it contains a raw line break"), (b"{oops", "it is not valid JSON")],
)
def test_a_broken_line_is_refused_and_logged_as_mcpds_fault(
    line: bytes, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, "mcpd.stdio"), pytest.raises(rpc.RPCError) as info:
        checked_line("notes", line, "a call")
    assert info.value.code == rpc.INTERNAL_ERROR
    assert info.value.message.startswith(f"mcpd could not send a call to notes: {fault}")
    (message,) = caplog.messages
    assert message.startswith(f"notes: did not send a call to the server: {fault}")
    assert message.endswith("(a fault in mcpd)")
