"""How many values and keys a JSON text holds, told from its bytes
(``protocol.lines.json_values``): never fewer than there are, and not fooled by what is
inside strings."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from protocol.lines.json_values import parts_at_most

# Strings full of what separates values elsewhere, and of escapes.
TEXT = st.text(alphabet='ab,:[]{}"\\\u00e9\u2028\n', max_size=12)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TEXT, inner, max_size=5),
    max_leaves=40,
)
ENCODERS = [
    msgspec.json.encode,
    lambda v: json.dumps(v).encode(),
    lambda v: json.dumps(v, ensure_ascii=False, indent=1).encode(),
]


def parts(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(1 + parts(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(parts(v) for v in value)
    return 1


@given(JSON, st.sampled_from(ENCODERS))
def test_never_fewer_than_there_are_and_over_any_cap_they_are_over(value: Any, encode: Any) -> None:
    text = encode(value)
    held = parts(value)
    assert parts_at_most(text, 10**9) >= held
    assert parts_at_most(text, held - 1) > held - 1
    # The bound is near: only an empty object or array counts twice.
    assert parts_at_most(text, 0) <= 2 * held


def test_empty_objects_by_the_million_are_told_without_decoding() -> None:
    text = b'{"x":[' + b",".join([b"{}"] * 1_000_000) + b"]}"
    assert parts_at_most(text, 250_000) > 250_000


def test_a_long_text_full_of_separators_is_one_value() -> None:
    text = json.dumps({"text": 'a, "b": [c], {d}\\ ' * 100_000}).encode()
    assert parts_at_most(text, 1000) == 3
    assert parts_at_most(msgspec.Raw(text), 1000) == 3


def test_strings_by_the_million_are_over_the_cap_by_their_count() -> None:
    text = b"[" + b",".join([b'"a"'] * 300_000) + b"]"
    assert parts_at_most(text, 250_000) > 250_000
