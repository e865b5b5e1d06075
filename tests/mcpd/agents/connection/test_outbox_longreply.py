"""A reply written piece by piece on a real line writer: nothing enters it while it is
written, what was put meanwhile follows it in order, a cancelled request still finishes
its line, and a reply that cannot be finished is the last thing the agent gets."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from mcpd.agents.connection.outbox import LongReplies
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.result_pieces import BrokenPiece
from protocol.lines.oneline import line_fault
from transports.linewriter import LineWriter

HEAD = b'{"jsonrpc":"2.0","id":1,"result":{"tools":['


class Wire:
    """A line writer to the agent's end of a socket pair, and a long reply on it."""

    def __init__(self, ours: trio.socket.SocketType, theirs: trio.socket.SocketType) -> None:
        self.stream = trio.SocketStream(ours)
        self.theirs = theirs
        self.out = LineWriter(self.stream, ours.fileno(), 1 << 20, line_fault)
        self.broken: list[BrokenPiece] = []
        self.long = LongReplies(self.out, self.put, self.broken.append)
        self._buf = b""

    def put(self, data: bytes, rid: rpc.Id | None) -> None:
        """As a connection puts a line: behind a long reply being written, if one is."""
        held = self.long.held
        if held is not None:
            held.append((data, rid))
        else:
            self.out.put(data)

    async def lines(self, count: int) -> list[Any]:
        with trio.fail_after(10):
            while self._buf.count(b"\n") < count:
                data = await self.theirs.recv(1 << 16)
                assert data, "the connection ended"
                self._buf += data
        *lines, self._buf = self._buf.split(b"\n", count)
        return [json.loads(line) for line in lines]

    async def rest(self) -> bytes:
        """Everything written so far that was not read as lines (the writer closed)."""
        self.stream.socket.close()
        with trio.fail_after(10):
            while data := await self.theirs.recv(1 << 16):
                self._buf += data
        return self._buf


@asynccontextmanager
async def wire() -> AsyncIterator[Wire]:
    ours, theirs = trio.socket.socketpair()
    w = Wire(ours, theirs)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(w.out.run)
            yield w
            nursery.cancel_scope.cancel()
    finally:
        w.out.close()
        w.stream.socket.close()
        theirs.close()


def tools(
    w: Wire, count: int, during: int | None = None, broken_at: int | None = None
) -> Iterator[bytes]:
    yield HEAD
    for i in range(count):
        if i == during:
            w.put(b'{"jsonrpc":"2.0","method":"notifications/progress"}', None)
            w.put(b'{"jsonrpc":"2.0","id":2,"result":{}}', 2)
        if i == broken_at:
            raise BrokenPiece("not valid JSON")
        yield (b"," if i else b"") + json.dumps({"name": f"t{i}", "pad": "x" * 1000}).encode()
    yield b"]}}"


async def test_lines_put_while_a_reply_is_written_follow_it_in_order() -> None:
    async with wire() as w:
        await w.long.send(tools(w, 50, during=10))
        reply, progress, answer = await w.lines(3)
        assert [t["name"] for t in reply["result"]["tools"]] == [f"t{i}" for i in range(50)]
        assert progress["method"] == "notifications/progress" and answer["id"] == 2
        assert w.long.held is None


async def test_two_long_replies_are_written_one_after_the_other() -> None:
    async with wire() as w, trio.open_nursery() as nursery:
        nursery.start_soon(w.long.send, tools(w, 300))
        nursery.start_soon(w.long.send, tools(w, 300))
        first, second = await w.lines(2)
        assert len(first["result"]["tools"]) == len(second["result"]["tools"]) == 300


async def test_a_reply_begun_is_finished_though_its_request_is_cancelled() -> None:
    async def cancelled(w: Wire) -> None:
        with trio.CancelScope() as scope:

            def cancelling() -> Iterator[bytes]:
                for n, piece in enumerate(tools(w, 2000, during=1000)):
                    if n == 500:
                        scope.cancel()  # the request is cancelled half-way
                    yield piece

            await w.long.send(cancelling())

    async with wire() as w, trio.open_nursery() as nursery:
        nursery.start_soon(cancelled, w)
        reply, progress, answer = await w.lines(3)  # more than the socket holds
        assert len(reply["result"]["tools"]) == 2000
        assert progress["method"] == "notifications/progress" and answer["id"] == 2


async def test_an_agent_gone_mid_reply_does_not_hold_the_reply_up() -> None:
    async def writer(w: Wire) -> None:
        # As a connection's writer: the stream broke, so nothing more is written.
        try:
            await w.out.run()
        except OSError:
            pass
        finally:
            w.out.close()

    ours, theirs = trio.socket.socketpair()
    w = Wire(ours, theirs)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer, w)
            theirs.close()
            with trio.fail_after(10):
                await w.long.send(tools(w, 5000, during=10))
            assert w.long.held is None
        assert w.out.closed
    finally:
        w.stream.socket.close()


async def test_a_reply_that_cannot_be_finished_is_the_last_thing_written() -> None:
    async with wire() as w:
        await w.long.send(tools(w, 5, during=1, broken_at=3))
        assert [str(e) for e in w.broken] == ["not valid JSON"]
        # What is put after it, before the connection has ended, is not written either.
        w.put(b'{"jsonrpc":"2.0","id":3,"result":{}}', 3)
        rest = await w.rest()
    assert rest.startswith(HEAD)
    assert b"\n" not in rest and b"notifications/progress" not in rest and b'"id":3' not in rest
