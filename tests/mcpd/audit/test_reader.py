"""Reading the audit log back as ``mcpd calls`` does: the files oldest first, whatever
else lies in the directory; lines cut short by a crash, of the wrong shape, or garbage
another process appended (however long); gaps the daemon noted; and the filters."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mcpd.audit.log import FILE_NAME
from mcpd.audit.reader import AuditRecords, Choice, log_files
from mcpd.audit.record import CallRecord, Gap

T0 = 1_785_000_000.0


def record(n: int, **kw: Any) -> CallRecord:
    base: dict[str, Any] = {
        "ts": T0 + n,
        "agent": {"pid": 100 + n, "uid": 1000},
        "method": "tools/call",
        "name": f"mcp__gh__tool{n}",
        "original": f"tool{n}",
        "server": "gh",
        "outcome": "ok",
    }
    return msgspec.convert({**base, **kw}, CallRecord)


def line(r: CallRecord | Gap) -> bytes:
    return msgspec.json.encode(r) + b"\n"


def write(directory: Path, name: str, *parts: bytes) -> None:
    (directory / name).write_bytes(b"".join(parts))


def names(reading: AuditRecords) -> list[str | None]:
    return [r.name for r in reading]


# -- the files --


def test_the_files_are_read_oldest_first_by_their_number_not_their_name(tmp_path: Path) -> None:
    for n in (1, 2, 9, 10, 11):
        write(tmp_path, f"{FILE_NAME}.{n}", line(record(100 - n)))
    write(tmp_path, FILE_NAME, line(record(100)))
    for stray in (f"{FILE_NAME}.bak", f"{FILE_NAME}.1.tmp", f"x{FILE_NAME}.3", f"{FILE_NAME}."):
        write(tmp_path, stray, line(record(0)))
    files = [os.path.basename(p) for p in log_files(str(tmp_path))]
    assert files == [f"{FILE_NAME}.{n}" for n in (11, 10, 9, 2, 1)] + [FILE_NAME]
    assert [r.ts for r in AuditRecords(str(tmp_path))] == [
        T0 + n for n in (89, 90, 91, 98, 99, 100)
    ]


def test_a_directory_without_a_log_has_no_files(tmp_path: Path) -> None:
    assert log_files(str(tmp_path / "nowhere")) == []
    assert log_files(str(tmp_path)) == []
    assert list(AuditRecords(str(tmp_path))) == []


def test_a_file_rotated_away_while_reading_is_passed_over(tmp_path: Path) -> None:
    write(tmp_path, f"{FILE_NAME}.1", line(record(1)))
    write(tmp_path, FILE_NAME, line(record(2)))
    reading = AuditRecords(str(tmp_path))
    (tmp_path / f"{FILE_NAME}.1").unlink()
    assert names(reading) == ["mcp__gh__tool2"]


# -- the lines --


def test_a_line_cut_short_by_a_crash_is_counted_and_the_rest_is_read(tmp_path: Path) -> None:
    whole = line(record(1))
    # A crash cut a line; the daemon, restarted, put a line feed after it and went on.
    write(tmp_path, f"{FILE_NAME}.1", whole, line(record(2))[:40], b"\n", line(record(3)))
    # The file written now ends in a torn line: the reader may meet one mid-write.
    write(tmp_path, FILE_NAME, line(record(4)), line(record(5))[:-9])
    reading = AuditRecords(str(tmp_path))
    assert names(reading) == ["mcp__gh__tool1", "mcp__gh__tool3", "mcp__gh__tool4"]
    assert reading.unreadable == 2


@pytest.mark.parametrize(
    "garbage",
    [
        b"[1, 2, 3]",
        b'"a string"',
        b"null",
        b'{"ts": 1, "agent": {}, "method": "tools/call"}',  # no outcome
        b'{"ts": "yesterday", "agent": {}, "method": "tools/call", "outcome": "ok"}',
        b'{"ts": 1, "agent": {}, "method": "tools/call", "outcome": "exploded"}',
        b'{"ts": 1, "agent": {"pid": "me"}, "method": "tools/call", "outcome": "ok"}',
        b'{"time": "x", "ts": 1, "dropped": "many"}',
        b"\x00" * 4096,  # a block a crash left unwritten
        b"\xff\xfe not text",
        b"{" * 100_000,  # deep nesting
    ],
)
def test_a_line_of_the_wrong_shape_is_counted_not_read(tmp_path: Path, garbage: bytes) -> None:
    write(tmp_path, FILE_NAME, line(record(1)), garbage + b"\n", line(record(2)))
    reading = AuditRecords(str(tmp_path))
    assert names(reading) == ["mcp__gh__tool1", "mcp__gh__tool2"]
    assert (reading.unreadable, reading.dropped) == (1, 0)


def test_blank_lines_crlf_and_fields_of_a_later_version_are_read(tmp_path: Path) -> None:
    later = msgspec.json.encode({**msgspec.to_builtins(record(2)), "profile_hint": "x"})
    write(tmp_path, FILE_NAME, b"\n  \n", line(record(1))[:-1] + b"\r\n", later + b"\n")
    reading = AuditRecords(str(tmp_path))
    assert names(reading) == ["mcp__gh__tool1", "mcp__gh__tool2"]
    assert reading.unreadable == 0


def test_gaps_are_summed_and_are_no_records(tmp_path: Path) -> None:
    write(tmp_path, f"{FILE_NAME}.1", line(Gap(time="t", ts=T0, dropped=5)), line(record(1)))
    write(tmp_path, FILE_NAME, line(Gap(time="t", ts=T0 + 1, dropped=7)))
    reading = AuditRecords(str(tmp_path))
    assert names(reading) == ["mcp__gh__tool1"]
    assert (reading.dropped, reading.unreadable) == (12, 0)


def test_calls_lost_to_a_file_that_could_not_be_written_are_summed_with_their_span(
    tmp_path: Path,
) -> None:
    lost = [
        Gap(time="t", ts=T0 + 9, lost=3, first_ts=T0 + 2, last_ts=T0 + 4),
        Gap(time="t", ts=T0 + 20, lost=4, first_ts=T0 + 11, last_ts=T0 + 12),
    ]
    write(tmp_path, FILE_NAME, line(lost[0]), line(record(5)), line(lost[1]))
    reading = AuditRecords(str(tmp_path))
    assert names(reading) == ["mcp__gh__tool5"]
    assert (reading.lost, reading.lost_from, reading.lost_until) == (7, T0 + 2, T0 + 12)
    assert (reading.dropped, reading.unreadable) == (0, 0)


def test_a_huge_line_of_garbage_is_passed_over_without_holding_it(tmp_path: Path) -> None:
    # Another process appended tens of megabytes without a line feed (or a crash left
    # a long run of zeros): the records after it are still read, in little memory.
    huge = 48 * 1024 * 1024
    with open(tmp_path / FILE_NAME, "wb") as f:
        f.write(line(record(1)))
        block = b"\x00" * (1024 * 1024)
        for _ in range(huge // len(block)):
            f.write(block)
        f.write(b"\n" + line(record(2)))
    reading = AuditRecords(str(tmp_path), max_line=1024 * 1024)
    tracemalloc.start()
    try:
        read = names(reading)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert read == ["mcp__gh__tool1", "mcp__gh__tool2"]
    assert reading.unreadable == 1
    assert peak < 8 * 1024 * 1024


def test_a_line_as_long_as_the_bound_is_still_a_record(tmp_path: Path) -> None:
    long = record(1, name="r" * 5000)
    encoded = line(long)
    write(tmp_path, FILE_NAME, encoded, line(record(2)))
    reading = AuditRecords(str(tmp_path), max_line=len(encoded))
    assert [r.name for r in reading] == ["r" * 5000, "mcp__gh__tool2"]
    shorter = AuditRecords(str(tmp_path), max_line=len(encoded) - 2)
    assert names(shorter) == ["mcp__gh__tool2"] and shorter.unreadable == 1


# -- the filters --


def chosen(records: list[CallRecord], **kw: Any) -> list[int]:
    compiled = Choice(**kw).compiled()
    return [int(r.ts - T0) for r in records if compiled.admits(r)]


RECORDS = [
    record(0),
    record(1, server="notes", name="search", original="search"),
    record(2, outcome="refused", decision="deny", agent={"pid": 7, "uid": 0}),
    record(3, outcome="tool_error", name="renamed", original="delete_repo"),
    # Named nothing mcpd could route: no server, no server's name.
    record(4, server=None, original=None, name="gh/delete_repo", outcome="refused"),
    record(5, method="completion/complete", name=None, original=None),
]


def test_no_choice_admits_every_record() -> None:
    assert chosen(RECORDS) == [0, 1, 2, 3, 4, 5]


def test_since_admits_from_that_moment_on() -> None:
    assert chosen(RECORDS, since=T0 + 2) == [2, 3, 4, 5]
    assert chosen(RECORDS, since=T0 + 1.5) == [2, 3, 4, 5]


def test_since_admits_a_summary_whose_last_request_came_after() -> None:
    summary = record(0, server=None, outcome="refused", count=900, last_ts=T0 + 9)
    assert chosen([summary], since=T0 + 8) == [0]
    assert chosen([summary], since=T0 + 10) == []


def test_the_server_is_a_glob_over_aliases() -> None:
    assert chosen(RECORDS, server="notes") == [1]
    assert chosen(RECORDS, server="g*") == [0, 2, 3, 5]


def test_the_tool_is_matched_by_the_agents_name_or_the_servers() -> None:
    assert chosen(RECORDS, tool="gh/delete_repo") == [3, 4]
    assert chosen(RECORDS, tool="renamed") == [3]
    assert chosen(RECORDS, tool="*/search") == [1]
    assert chosen(RECORDS, tool="mcp__gh__*") == [0, 2]
    # Names are told apart by case, as servers tell their tools apart.
    assert chosen(RECORDS, tool="GH/DELETE_REPO") == []


def test_the_agent_is_a_process_or_a_user() -> None:
    assert chosen(RECORDS, agent=7) == [2]
    assert chosen(RECORDS, agent=0) == [2]  # uid 0
    assert chosen(RECORDS, agent=1000) == [0, 1, 3, 4, 5]
    assert chosen(RECORDS, agent=101) == [1]


def test_a_user_is_its_uid_never_a_pid_of_that_number() -> None:
    assert chosen(RECORDS, uid=0) == [2]
    assert chosen(RECORDS, uid=1000) == [0, 1, 3, 4, 5]
    assert chosen(RECORDS, uid=7) == []  # the pid of record 2
    assert chosen(RECORDS, uid=500) == []  # the pid of record 0


def test_failed_admits_every_outcome_but_ok_and_filters_combine() -> None:
    assert chosen(RECORDS, failed=True) == [2, 3, 4]
    assert chosen(RECORDS, failed=True, server="gh", since=T0 + 3) == [3]
