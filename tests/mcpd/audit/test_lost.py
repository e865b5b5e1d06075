"""What the file took of a batch before it refused the rest: the records it took whole
are not counted lost, the one cut short and those after it are; a gap line it took
has said what it holds, one it cut short has not."""

from __future__ import annotations

import json

from mcpd.audit.lost import Lost

BATCH = [(1, 10.0, 10.0), (1, 11.0, 11.0), (5, 12.0, 14.0)]
LINES = b'{"a":1}\n{"b":2}\n{"c":3}\n'


def test_the_records_taken_whole_are_not_lost() -> None:
    lost = Lost()
    lost.failed(b"", LINES, len(b'{"a":1}\n{"b'), BATCH)
    assert (lost.calls, lost.first, lost.last) == (6, 11.0, 14.0)
    gap = json.loads(lost.gap_line(20.0))
    assert (gap["lost"], gap["first_ts"], gap["last_ts"], gap["ts"]) == (6, 11.0, 14.0, 20.0)


def test_nothing_lost_is_no_line() -> None:
    assert Lost().gap_line(1.0) == b""


def test_a_gap_line_cut_short_still_has_its_calls_to_say() -> None:
    lost = Lost()
    lost.failed(b"", LINES, 0, BATCH[:1])
    head = lost.gap_line(15.0)
    lost.failed(head, LINES, len(head) - 1, BATCH)
    assert (lost.calls, lost.first, lost.last) == (8, 10.0, 14.0)


def test_a_gap_line_taken_has_said_its_calls() -> None:
    lost = Lost()
    lost.failed(b"", LINES, 0, BATCH[:1])
    head = lost.gap_line(15.0)
    lost.failed(head, LINES, len(head) + len(b'{"a":1}\n'), BATCH)
    assert (lost.calls, lost.first, lost.last) == (6, 11.0, 14.0)
