from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.lines.framing import LineFramer, Oversized, without_bom


def test_half_lines_are_kept_until_complete() -> None:
    f = LineFramer()
    assert f.feed(b'{"a":') == []
    assert f.feed(b"1}") == []
    assert f.feed(b'\n{"b"') == [b'{"a":1}']
    assert f.feed(b":2}\n") == [b'{"b":2}']


def test_several_lines_in_one_chunk_and_crlf() -> None:
    f = LineFramer()
    assert f.feed(b"one\r\ntwo\n\n  \nthree\n") == [b"one", b"two", b"three"]


def test_final_flush_returns_an_unterminated_last_line() -> None:
    f = LineFramer()
    assert f.feed(b"a\nb") == [b"a"]
    assert f.flush() == [b"b"]
    assert f.flush() == []


def test_a_line_split_across_many_reads() -> None:
    f = LineFramer()
    line = b"x" * 20_000
    out: list[bytes | Oversized] = []
    for i in range(0, len(line), 13):
        out += f.feed(line[i : i + 13])
    out += f.feed(b"\n")
    assert out == [line]


def test_overflow_is_reported_once_and_memory_stays_bounded() -> None:
    f = LineFramer(max_line=100)
    out = f.feed(b'{"id":3,' + b"x" * 150)
    assert len(out) == 1 and isinstance(out[0], Oversized)
    assert out[0].prefix.startswith(b'{"id":3,')
    for _ in range(1000):
        assert f.feed(b"y" * 1000) == []
        assert f.buffered == 0
    assert f.feed(b"end of the long line\nnext\n") == [b"next"]


def test_overflow_in_a_single_complete_chunk() -> None:
    f = LineFramer(max_line=10)
    out = f.feed(b"short\n" + b"z" * 50 + b"\nok\n")
    assert out[0] == b"short" and isinstance(out[1], Oversized) and out[2] == b"ok"


@pytest.mark.parametrize("report_end", [False, True])
def test_the_bytes_of_a_line_over_the_limit_are_counted_as_they_are_skipped(
    report_end: bool,
) -> None:
    # Read and thrown away, they cost reading all the same: one that never ends too.
    f = LineFramer(max_line=100, report_end=report_end)
    assert f.feed(b"{" + b"x" * 60) == []
    assert f.take_skipped() == 0  # kept: it may still end within the limit
    assert f.feed(b"x" * 50)
    assert f.take_skipped() == 111
    assert f.take_skipped() == 0
    for _ in range(3):
        assert f.feed(b"y" * 1000) == []
        assert f.skipped == 1000
        assert f.take_skipped() == 1000
    assert f.feed(b"yy\n{}\n")[-1] == b"{}"
    assert f.take_skipped() == 2
    out = f.feed(b"{}\n" + b"z" * 200 + b"\n{}\n")
    assert isinstance(out[1], Oversized) and out[0] == out[-1] == b"{}"
    assert f.take_skipped() == 200


def test_blank_lines_are_dropped_but_counted_with_their_bytes_until_taken() -> None:
    # Not handed on, they were read all the same: a reader charges them as lines.
    f = LineFramer()
    assert f.feed(b"\n\n \n\t\r\n") == []
    assert f.take_blank() == (4, 3)
    assert f.take_blank() == (0, 0)
    long = b"{" + b"x" * 3000 + b"}"  # a chunk of long lines is cut up line by line
    assert f.feed(long + b"\n\n\r\n  ") == [long]
    assert f.take_blank() == (2, 1)
    assert f.feed(b" \n{}\n  ") == [b"{}"]  # ends the line begun before
    assert f.take_blank() == (1, 3)
    assert f.flush() == []  # the last, without its newline
    assert f.take_blank() == (1, 2)


@given(
    st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=20),
    st.lists(st.integers(1, 50), min_size=1, max_size=30),
)
def test_any_chunking_gives_the_same_lines_and_blank_ones(
    lines: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    expected = [x.removesuffix(b"\r") for x in lines]
    expected = [x for x in expected if x and not x.isspace()]
    f = LineFramer()
    out: list[bytes | Oversized] = []
    pos = 0
    i = 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        out += f.feed(stream[pos : pos + step])
        pos += step
        i += 1
    out += f.flush()
    assert out == expected
    blank = [x for x in lines if not x.removesuffix(b"\r").strip()]
    assert f.take_blank() == (len(blank), sum(map(len, blank)))


def test_a_byte_order_mark_in_front_of_a_line_is_not_part_of_it() -> None:
    assert without_bom(b'\xef\xbb\xbf{"id":1}') == b'{"id":1}'
    assert without_bom(b'{"id":1}') == b'{"id":1}'
    # Only one mark is taken: a second is the line's own (and not JSON).
    assert without_bom(b"\xef\xbb\xbf\xef\xbb\xbf{}") == b"\xef\xbb\xbf{}"
