"""How deep a JSON text nests, told from its bytes."""

from __future__ import annotations

import json

import pytest

from protocol.lines.nesting import deeper_than


@pytest.mark.parametrize(
    ("text", "deeper"),
    [
        (b"[" * 4 + b"]" * 4, True),
        (b"[" * 3 + b"]" * 3, False),
        (b'[{"a":[]},[[]]]', False),  # side by side, not within each other
        (b'{"a":[[["x"]]]}', True),
        (b'["[[[[", "{{{{"]', False),  # in strings they count for nothing
        (b'["\\"[[[[", "\\\\", [[]]]', False),  # nor past an escaped quote
        (b'[[["[[[[[[', False),  # a string left open ends the text
        (b'[[[[["', True),
    ],
)
def test_only_brackets_outside_strings_count(text: bytes, deeper: bool) -> None:
    assert deeper_than(text, 3) is deeper


def test_a_long_flat_text_is_not_deep() -> None:
    assert not deeper_than(json.dumps([[], {}] * 100_000).encode(), 3)


@pytest.mark.parametrize("tail", [b"", b"\\"])
def test_a_string_that_never_ends_is_the_rest_of_the_text_whatever_it_holds(tail: bytes) -> None:
    # Escaped quotes within it are no strings of their own, nor its brackets depth.
    unended = b'"' + b'\\"[' * 2_000 + tail
    assert deeper_than(b"[" * 513 + unended)
    assert not deeper_than(b"[" * 512 + unended)
