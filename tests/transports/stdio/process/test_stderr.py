"""A stdio server's stderr as log records, a burst to a record, its last lines kept."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from tests.support.hostile.cut_secret import MARKER, SECRET, beginnings, guarded, padded
from transports.read_pace import ReadPace
from transports.stdio.process.stderr import (
    BURST_GAP,
    BURST_LINES,
    RECORD_BYTES,
    StderrLog,
    read_stderr,
)


async def read_all(
    stream: trio.abc.ReceiveStream, log: StderrLog, pace: ReadPace | None = None
) -> None:
    with (pace or ReadPace("s", 1 << 20)).stream() as paced:
        await read_stderr(stream, log, paced)


def records(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "mcpd.stdio"]


async def test_lines_that_come_together_are_one_record_and_a_pause_ends_it(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    log = StderrLog("s", tail=3)
    ours, theirs = trio.testing.memory_stream_pair()
    with caplog.at_level(logging.INFO, "mcpd.stdio"):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_all, theirs, log)
            await ours.send_all(b"Traceback:\n  File x\nValueError: ")
            await ours.send_all(b"bad\n")
            await trio.sleep(BURST_GAP * 2)
            await ours.send_all(b"after the pause\nno newline at the end")
            await ours.send_eof()
    assert records(caplog) == [
        "Traceback:\n  File x\nValueError: bad",
        "after the pause\nno newline at the end",
    ]
    assert list(log.tail) == ["ValueError: bad", "after the pause", "no newline at the end"]


async def test_a_long_burst_is_cut_into_records_of_a_bounded_size(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    log = StderrLog("s", tail=5)
    ours, theirs = trio.testing.memory_stream_pair()
    with caplog.at_level(logging.INFO, "mcpd.stdio"):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_all, theirs, log)
            await ours.send_all(b"".join(b"line %d\n" % i for i in range(BURST_LINES + 1)))
            await ours.send_eof()
    first, second = records(caplog)
    assert first.count("\n") == BURST_LINES - 1
    assert second == f"line {BURST_LINES}"


def test_a_line_taker_gets_each_line_instead_of_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    taken: list[str] = []
    log = StderrLog("s", tail=2, on_line=taken.append)
    with caplog.at_level(logging.INFO, "mcpd.stdio"):
        for item in (b"one", b"two \xff", b"three"):
            log.line(item)
        log.flush()
    assert taken == ["one", "two \ufffd", "three"]
    assert list(log.tail) == ["two \ufffd", "three"]
    assert records(caplog) == []


async def test_a_long_line_cut_inside_a_secret_shows_none_of_it_once_guarded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The server pads the line so that the part of it kept ends inside the secret.
    log = StderrLog("s", tail=3)
    ours, theirs = trio.testing.memory_stream_pair()
    with caplog.at_level(logging.INFO, "mcpd.stdio"):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_all, theirs, log)
            await ours.send_all(padded(512, after=5000).encode() + b"\n")
            await ours.send_eof()
    [said] = records(caplog)
    assert list(log.tail) == [said] and said.endswith("\u2026 (and over 3584 more bytes)")
    assert SECRET[:-1] in said
    assert beginnings(guarded(said)) == [] and MARKER in guarded(said)


async def test_a_burst_of_long_lines_is_cut_into_records_of_a_few_kib_and_no_line_is_lost(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    log = StderrLog("s", tail=5)
    ours, theirs = trio.testing.memory_stream_pair()
    lines = [b"%d " % i + b"F" * 1500 for i in range(20)]
    with caplog.at_level(logging.INFO, "mcpd.stdio"):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_all, theirs, log)
            await ours.send_all(b"\n".join(lines) + b"\n")
            await ours.send_eof()
    kept = records(caplog)
    assert len(kept) > 1
    assert all(len(record.encode()) <= RECORD_BYTES for record in kept)
    assert "\n".join(kept).encode() == b"\n".join(lines)


async def test_a_server_writing_stderr_without_end_is_read_at_its_pace_and_shown_held_back(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    log = StderrLog("s", tail=5)
    pace = ReadPace("s", 1 << 20, rate=10)
    ours, theirs = trio.testing.memory_stream_pair()
    with caplog.at_level(logging.INFO):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_all, theirs, log, pace)
            for i in range(100):
                await ours.send_all(b"line %d\n" % i)
            held = pace.held_back
            await ours.send_eof()
    assert held is not None
    assert "its stderr" in held.reason
    assert any(r.getMessage().startswith("s: reading held back") for r in caplog.records)
    # The lines are all read in the end, only more slowly.
    assert list(log.tail)[-1] == "line 99"


async def test_a_server_writing_blank_lines_on_stderr_without_end_is_held_back(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    # Not logged, they were read all the same: each counts as a line.
    log = StderrLog("s", tail=5)
    pace = ReadPace("s", 1 << 20, rate=10)
    ours, theirs = trio.testing.memory_stream_pair()
    with caplog.at_level(logging.INFO):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_all, theirs, log, pace)
            for _ in range(100):
                await ours.send_all(b"\n \n")
            held = pace.held_back
            await ours.send_eof()
    assert held is not None
    assert "its stderr" in held.reason
    assert records(caplog) == [] and not log.tail
