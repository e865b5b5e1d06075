"""Text a JSON line may carry that no decoder takes: each fault found with where it is,
in words a model can act on, and the line mended so that the rest of it still reads."""

from __future__ import annotations

import json

import pytest

from protocol.lines.textfaults import invalid_utf8, leading_bom, lone_surrogate, utf8_fault


def test_valid_utf8_has_no_fault_and_invalid_bytes_are_placed() -> None:
    assert utf8_fault(b"plain ascii") is None
    assert utf8_fault("été 😀".encode()) is None
    assert utf8_fault(b"ab\xffcd") == "invalid start byte at byte 2"
    assert utf8_fault("😀".encode()[:2]) == "unexpected end of data at byte 0"


def test_a_line_with_bytes_that_are_not_utf8_is_mended_with_replacements() -> None:
    fault = invalid_utf8(b'{"text": "a\xffb"}')
    assert fault is not None
    assert fault.what == (
        "bytes that are not UTF-8 (invalid start byte at byte 11): send its text encoded as UTF-8"
    )
    assert json.loads(fault.mended) == {"text": "a\ufffdb"}
    assert invalid_utf8(b'{"text": "ok"}') is None


@pytest.mark.parametrize(
    "line",
    [
        b'{"t": "no escapes"}',
        b'{"t": "\\ud83d\\ude00 a whole pair"}',
        b'{"t": "\\\\ud83d is an escaped backslash, then text"}',
        b'{"t": "\\u00e9\\n\\""}',
    ],
)
def test_whole_pairs_and_other_escapes_are_no_fault(line: bytes) -> None:
    assert lone_surrogate(line) is None


def test_each_lone_half_is_mended_and_the_first_named() -> None:
    line = b'{"a": "x\\ud83d", "b": "\\uDE00y", "c": "\\ud83d\\ude00"}'
    fault = lone_surrogate(line)
    assert fault is not None
    assert fault.what.startswith("a lone UTF-16 surrogate (\\ud83d), half of a character")
    assert json.loads(fault.mended) == {"a": "x\ufffd", "b": "\ufffdy", "c": "😀"}


def test_a_high_half_before_a_second_high_half_is_lone() -> None:
    fault = lone_surrogate(b'["\\ud83d\\ud83d\\ude00"]')
    assert fault is not None
    assert json.loads(fault.mended) == ["\ufffd😀"]


def test_a_byte_order_mark_in_front_is_named_and_taken_off() -> None:
    fault = leading_bom(b'\xef\xbb\xbf{"a": 1}')
    assert fault is not None
    assert "byte order mark (U+FEFF) in front" in fault.what
    assert fault.mended == b'{"a": 1}'
    assert leading_bom(b'{"a": "\xef\xbb\xbf"}') is None
