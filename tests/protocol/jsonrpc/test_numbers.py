"""Numbers that common decoders do not read, told from a JSON text's bytes: the same
numbers msgspec refuses (an integer of more than 4300 characters, a number past the
largest double), wherever they are outside the text's strings, and none inside them."""

from __future__ import annotations

import base64
import json
import random
import time
import tracemalloc

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.jsonrpc.numbers import (
    MAX_INTEGER_DIGITS,
    MOST_READ,
    PIECE,
    number_fault,
    plain_line,
)

DOUBLE = "a number no JSON decoder reads (one past the largest double, about 1.8e308)"


def integer(n: int) -> str:
    return f"a number no JSON decoder reads (an integer written in {n} characters, past the"


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        (b'{"a":' + b"9" * 4301 + b"}", integer(4301)),
        (b"[-" + b"9" * 4300 + b"]", integer(4301)),
        (b'{"a": 1e999999}', DOUBLE),
        (b'{"a":[1.5E+309]}', DOUBLE),
        (b"[" + b"1" * 290 + b"e20]", DOUBLE),
        (b"[" + b"1" * 310 + b".5]", DOUBLE),
        (b"[0.00001e310]", None),
        (b"1e400", DOUBLE),
        (b'{"a":' + b"9" * 4300 + b"}", None),
        (b'{"a":1e308, "b": -1.7e308}', None),
        (b'{"a":1e-999999}', None),
        (b"[" + b"1" * 300 + b".5e-100]", None),
        (b"[1e" + b"0" * 300 + b"1]", None),
        (json.dumps({"a": "1e999999 " + "9" * 5000}).encode(), None),
        (json.dumps({"a": "x: 1e999999, [" + "9" * 5000}).encode(), None),
        (b'{"a":"\\"", "b": [true, 2e400]}', DOUBLE),
    ],
)
def test_what_no_decoder_reads_is_named_and_nothing_else(text: bytes, fault: str | None) -> None:
    got = number_fault(text)
    assert got == fault or (fault is not None and got is not None and got.startswith(fault))


LONG_STRING = json.dumps({"a": "b" * PIECE}).encode()


@pytest.mark.parametrize(
    ("line", "plain"),
    [
        (b'{"id":1,"result":{"content":[]}}', True),
        (b'{"id":1,"result":{"n":1e300}}', True),
        (b'{"id":1,"result":{"n":1e999}}', False),
        (b'{"id":1,"result":{"n":' + b"9" * 4301 + b"}}", False),
        (b'{"id":1,"result":{"s":"1e999 ' + b"9" * 4301 + b'"}}', True),
        (b'{"id":1,\r"result":{}}', False),
        (b'{"id":1,\n"result":{}}', False),
        (LONG_STRING, True),
        (LONG_STRING[:-1] + b',"n":1e999}', False),
        (LONG_STRING[:-1] + b',"n":' + b"9" * 4301 + b"}", False),
        (LONG_STRING[:-2] + b'\r"}', False),
        (LONG_STRING[:-2] + b'\n"}', False),
    ],
)
def test_a_plain_line_is_one_line_whose_numbers_every_decoder_reads(
    line: bytes, plain: bool
) -> None:
    """What the fast paths that keep results and arguments raw may take: short and long
    lines alike (a long one is read in pieces, never translated whole)."""
    assert plain_line(line) is plain


def msgspec_refuses(text: bytes) -> bool:
    try:
        msgspec.json.decode(text)
    except msgspec.DecodeError:
        return True
    return False


def test_it_refuses_what_msgspec_refuses_and_only_that() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        digits = rng.choice([1, 150, 199, 200, 250, 308, 309, 310, 4299, 4300, 4301])
        number = rng.choice(["", "-"]) + str(rng.randint(1, 9))
        number += "".join(rng.choice("0123456789") for _ in range(digits - 1))
        if rng.random() < 0.5:
            number += "." + "".join(rng.choice("0123456789") for _ in range(rng.choice([1, 300])))
        if rng.random() < 0.6:
            exponent = rng.choice([0, 20, 99, 100, 108, 109, 200, 300, 307, 308, 309, 999999])
            number += rng.choice("eE") + rng.choice(["", "+", "-"]) + str(exponent)
        text = f'{{"k": [1, {number} ], "s": "{number}"}}'.encode()
        assert (number_fault(text) is not None) is msgspec_refuses(text), number[:40]


FINITE = st.floats(allow_nan=False, allow_infinity=False)


@given(st.recursive(st.none() | st.booleans() | FINITE | st.integers() | st.text(), st.lists))
def test_what_json_writes_of_a_double_or_an_integer_is_always_read(value: object) -> None:
    assert number_fault(json.dumps(value).encode()) is None


def test_digits_and_exponents_in_a_strings_text_cost_no_second_look() -> None:
    # A base64 image or a hash holds "1e234" here and there: letters around them show
    # they are text, without taking the strings out of the whole message.
    image = base64.b64encode(random.Random(3).randbytes(3_000_000)).decode()
    text = json.dumps({"content": [{"type": "image", "data": image}]}).encode()
    assert number_fault(text) is None


def test_past_a_bound_of_numbers_to_read_one_by_one_the_text_is_refused() -> None:
    fine = b"[" + b",".join([b"1e100"] * MOST_READ) + b"]"
    assert number_fault(fine) is None
    more = b"[" + b",".join([b"1e100"] * (MOST_READ + 1)) + b"]"
    assert f"more than {MOST_READ} numbers" in (number_fault(more) or "")


def test_a_hostile_text_is_read_in_time_that_grows_with_its_length() -> None:
    runs = (b"9" * 199 + b",") * 20_000 + b"0"
    strings = json.dumps(["1e999 " * 100_000, "9" * MAX_INTEGER_DIGITS * 100]).encode()
    for text in (b"[" + runs + b"]", strings):
        started = time.perf_counter()
        assert number_fault(text) is None
        assert time.perf_counter() - started < 2.0


@pytest.mark.parametrize("shift", [-5000, -3, -1, 0, 1, 2, 4])
def test_a_number_across_the_edge_of_a_piece_is_found(shift: int) -> None:
    for number, fault in ((b"1e400", DOUBLE), (b"9" * 5000, integer(5000))):
        head = b'{"s":"' + b"x" * (PIECE - 12 + shift) + b'","n":'
        assert (number_fault(head + number + b"}") or "").startswith(fault)
        quoted = head + b'"' + number + b'"}'
        assert number_fault(quoted) is None


def test_a_long_text_is_read_a_piece_at_a_time_not_copied_whole() -> None:
    # Nothing like such a number in it; many places like one, all in a string.
    for words in ("abc 123 ", "x1e999 "):
        text = json.dumps({"data": words * (1 << 19), "n": 1}).encode()
        tracemalloc.start()
        try:
            assert number_fault(text) is None
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < len(text) // 4, peak
