from __future__ import annotations

import os
import random

import pytest
import trio

from transports import linewriter
from transports.chunks import batch
from transports.linewriter import LineWriter


def pipe() -> tuple[trio.lowlevel.FdStream, trio.lowlevel.FdStream]:
    r, w = os.pipe()
    return trio.lowlevel.FdStream(r), trio.lowlevel.FdStream(w)


async def read_exactly(stream: trio.lowlevel.FdStream, n: int) -> bytes:
    data = b""
    while len(data) < n:
        data += await stream.receive_some(n - len(data))
    return data


async def test_an_idle_writer_writes_at_once_without_its_task() -> None:
    r, w = pipe()
    writer = LineWriter(w, w.fileno())
    writer.put(b'{"a":1}')
    # No writer task is running: the line went out from put() itself.
    with trio.fail_after(5):
        assert await read_exactly(r, 8) == b'{"a":1}\n'
    assert writer.queued == 0


async def test_a_batch_is_written_in_one_go_when_it_ends() -> None:
    r, w = pipe()
    writer = LineWriter(w, w.fileno())
    with batch():
        for i in range(3):
            writer.put(b"line%d" % i)
        assert writer.queued == 18  # held back until the batch ends
    assert writer.queued == 0
    with trio.fail_after(5):
        assert await read_exactly(r, 18) == b"line0\nline1\nline2\n"


async def test_a_slow_reader_makes_the_writer_task_catch_up_and_bounds_memory() -> None:
    r, w = pipe()
    writer = LineWriter(w, w.fileno(), limit=256 * 1024)
    chunk = b"x" * 9_999
    total = 40 * (len(chunk) + 1)

    async def reader() -> None:
        nonlocal total
        while total:
            await trio.sleep(0.001)  # slower than the writer
            total -= len(await r.receive_some(65536))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.run)
        nursery.start_soon(reader)
        # Far more than a pipe holds: the rest waits in the writer, in its queue or
        # being written, until the reader takes it.
        with trio.fail_after(10):
            for _ in range(40):
                await writer.wait_room()
                writer.put(chunk)
                assert writer.queued <= 256 * 1024 + len(chunk) + 1
            await writer.drain()
            while total:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()


async def test_a_closed_peer_ends_the_writer_with_an_error() -> None:
    r, w = pipe()
    writer = LineWriter(w, w.fileno())
    await r.aclose()
    writer.put(b"lost")
    with trio.fail_after(5), pytest.raises(OSError):
        await writer.run()


async def test_a_line_its_check_refuses_is_not_written_and_the_reason_returned() -> None:
    from protocol.lines.oneline import line_fault

    r, w = pipe()
    writer = LineWriter(w, w.fileno(), check=line_fault)
    assert writer.put(b'{"a":\n1}') == "it contains a raw line break"
    assert writer.put(b'{"a":1}\r') == "it contains a raw line break"
    fault = writer.put(b'{"a":1')
    assert fault is not None and fault.startswith("it is not valid JSON")
    assert writer.put(b'{"a":"\\n\xe2\x80\xa8"}') is None
    assert writer.refused == 3
    # Only the good line went out, alone on its line.
    with trio.fail_after(5):
        assert await read_exactly(r, 14) == b'{"a":"\\n\xe2\x80\xa8"}\n'
    assert writer.queued == 0


async def test_big_and_small_lines_come_out_whole_and_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Small thresholds so that big lines (kept by reference, not copied) and the cap
    # on buffers per write both come up often, with a pipe that is mostly full.
    monkeypatch.setattr(linewriter, "_BIG", 100)
    monkeypatch.setattr(linewriter, "_MAX_PARTS", 4)
    rng = random.Random(3)
    r, w = pipe()
    writer = LineWriter(w, w.fileno(), limit=1 << 20)
    lines = [
        bytes([65 + i % 26]) * rng.choice([1, 50, 99, 100, 101, 5000, 70_000]) for i in range(400)
    ]
    expected = b"".join(line + b"\n" for line in lines)
    got = bytearray()
    read_all = trio.Event()

    async def reader() -> None:
        while len(got) < len(expected):
            got.extend(await r.receive_some(rng.choice([10, 1000, 65536])))
            await trio.lowlevel.checkpoint()
        read_all.set()

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            nursery.start_soon(reader)
            i = 0
            while i < len(lines):
                if rng.random() < 0.3:
                    with batch():
                        for line in lines[i : i + 5]:
                            writer.put(line)
                    i += 5
                else:
                    writer.put(lines[i])
                    i += 1
                if rng.random() < 0.2:
                    await trio.lowlevel.checkpoint()
            await writer.drain()
            await read_all.wait()
            nursery.cancel_scope.cancel()
    assert bytes(got) == expected
    assert writer.queued == 0


async def test_a_line_taken_back_unbegun_is_never_written_and_a_begun_one_ends_whole() -> None:
    r, w = pipe()
    writer = LineWriter(w, w.fileno(), limit=1 << 20)
    first, begun, queued, sending = (bytes([c]) * 200_000 for c in b"abcd")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.run)
        writer.put(first)  # fills the pipe; the writer task is left with the rest
        await trio.testing.wait_all_tasks_blocked()
        own_begun = writer.put_own(begun)
        own_queued = writer.put_own(queued)
        assert own_begun is not None and own_queued is not None
        held = writer.queued
        assert writer.withdraw(own_queued)  # still in the queue
        assert writer.queued == held - 200_001
        own_sending = writer.put_own(sending)
        assert own_sending is not None
        with trio.fail_after(10):
            # The writer task takes the rest of the queue once ``first`` is written, and
            # begins ``begun``: ``sending`` is now the one it is writing next.
            assert await read_exactly(r, 200_001) == b"a" * 200_000 + b"\n"
            await trio.testing.wait_all_tasks_blocked()
            assert not writer.withdraw(own_begun)
            assert writer.withdraw(own_sending)
            assert writer.queued <= 200_001
            writer.put(b"end")
            got = await read_exactly(r, 200_001 + 4)
        assert got == b"b" * 200_000 + b"\nend\n"
        nursery.cancel_scope.cancel()


async def test_a_short_line_a_full_pipe_refuses_whole_can_still_be_taken_back() -> None:
    # A pipe takes a write of a page or less whole or not at all: the line is queued
    # with none of it written, though the writer was idle when it came.
    r, w = pipe()
    writer = LineWriter(w, w.fileno())
    filler = b"x" * 8192
    while writer.queued == 0:
        writer.put(filler)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.run)
        with trio.fail_after(10):
            while writer.queued:  # what did not fit is written as the reader reads
                await r.receive_some(len(filler))
                await trio.testing.wait_all_tasks_blocked()
        # The writer is idle now, and the pipe near full again: fill it to the brim.
        os.set_blocking(w.fileno(), False)
        while True:
            try:
                os.write(w.fileno(), b"y")
            except BlockingIOError:
                break
        own = writer.put_own(b'{"id":2}')
        assert own is not None
        assert writer.withdraw(own)
        assert writer.queued == 0
        nursery.cancel_scope.cancel()
