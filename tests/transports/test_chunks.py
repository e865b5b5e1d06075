"""Reading a pipe or socket: a chunk per call, waiting first when told the last read
emptied it, and the errors trio's streams raise; and the batch of writes held back
over a chunk's handling."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator

import pytest
import trio

from transports import chunks
from transports.chunks import BATCH, batch


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    r, w = os.pipe()
    os.set_blocking(r, False)
    yield r, w
    for fd in (r, w):
        with contextlib.suppress(OSError):
            os.close(fd)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The results of each os.read the reader makes: bytes read, or -1 for nothing yet."""
    seen: list[int] = []
    real = os.read

    def counted(fd: int, n: int) -> bytes:
        try:
            data = real(fd, n)
        except BlockingIOError:
            seen.append(-1)
            raise
        seen.append(len(data))
        return data

    monkeypatch.setattr(chunks.os, "read", counted)
    return seen


async def test_waiting_first_costs_no_failed_read(pipe: tuple[int, int], reads: list[int]) -> None:
    r, w = pipe

    async def later() -> None:
        await trio.sleep(0.05)
        os.write(w, b"answer\n")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(later)
        assert await chunks.receive(r, 65536, wait_first=True) == b"answer\n"
    assert reads == [7]


async def test_trying_first_reads_what_is_there_and_waits_for_the_rest(
    pipe: tuple[int, int], reads: list[int]
) -> None:
    r, w = pipe
    os.write(w, b"one\n")
    assert await chunks.receive(r, 65536) == b"one\n"
    os.write(w, b"two\n")
    # Told to wait first, it still gets what is already there.
    assert await chunks.receive(r, 65536, wait_first=True) == b"two\n"

    async def later() -> None:
        await trio.sleep(0.05)
        os.write(w, b"three\n")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(later)
        assert await chunks.receive(r, 65536) == b"three\n"
    assert reads == [4, 4, -1, 6]


async def test_end_and_errors(pipe: tuple[int, int]) -> None:
    r, w = pipe
    os.write(w, b"last")
    os.close(w)
    assert await chunks.receive(r, 2) == b"la"
    assert await chunks.receive(r, 65536, wait_first=True) == b"st"
    assert await chunks.receive(r, 65536, wait_first=True) == b""
    os.close(r)
    with pytest.raises(trio.ClosedResourceError):
        await chunks.receive(r, 16)
    a, b = socket.socketpair()
    with a:
        a.setblocking(False)
        a.send(b"unread")
        b.close()  # with our bytes unread: the peer reset the connection
        with pytest.raises(trio.BrokenResourceError):
            await chunks.receive(a.fileno(), 65536)


async def test_data_found_at_once_survives_a_cancellation(pipe: tuple[int, int]) -> None:
    r, w = pipe
    os.write(w, b"kept\n")
    with trio.CancelScope() as scope:
        scope.cancel()
        got = await chunks.receive(r, 65536)
    assert got == b"kept\n"
    with trio.CancelScope() as scope:
        scope.cancel()
        await chunks.receive(r, 65536, wait_first=True)  # nothing there: cancelled waiting
    assert scope.cancelled_caught


def test_a_flush_held_in_a_batch_runs_once_as_the_outermost_block_ends() -> None:
    ran: list[str] = []
    with batch():
        assert BATCH.flushes == []
        with batch():
            assert BATCH.flushes is not None
            BATCH.flushes.append(lambda: ran.append("a"))
        assert ran == []  # an inner block's end writes nothing
        BATCH.flushes.append(lambda: ran.append("b"))
    assert ran == ["a", "b"]
    assert BATCH.flushes is None


def test_outside_a_batch_nothing_is_held() -> None:
    assert batch() is BATCH
    assert BATCH.flushes is None


def test_a_block_left_by_an_error_still_flushes_what_it_held() -> None:
    ran: list[str] = []
    try:
        with batch():
            assert BATCH.flushes is not None
            BATCH.flushes.append(lambda: ran.append("written"))
            raise ValueError("handling the chunk failed")
    except ValueError:
        pass
    assert ran == ["written"] and BATCH.flushes is None
