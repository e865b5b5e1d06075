import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.http.sse import (
    DEFAULT_RETRY,
    FREE_LINE_BYTES,
    EventTooLarge,
    ResumePoint,
    SSEDecoder,
    SSEError,
    SSEEvent,
    data_cost,
)
from protocol.pacing.read_budget import cost, skipped


def decode_all(*chunks: bytes, max_event: int = 1 << 20) -> list[SSEEvent]:
    dec = SSEDecoder(max_event)
    out: list[SSEEvent] = []
    for chunk in chunks:
        out += dec.feed(chunk)
    out += dec.flush()
    return out


def test_single_event_with_type_and_id() -> None:
    (ev,) = decode_all(b'event: message\nid: 7\ndata: {"a":1}\n\n')
    assert ev == SSEEvent(data=b'{"a":1}', event="message", id="7")


def test_missing_event_type_means_message() -> None:
    (ev,) = decode_all(b"data: x\n\n")
    assert ev.event == "message"
    assert ev.id is None


def test_multiline_data_is_joined_with_newlines() -> None:
    (ev,) = decode_all(b"data: first\ndata:second\ndata:  third\n\n")
    assert ev.data == b"first\nsecond\n third"


def test_comments_and_unknown_fields_are_ignored() -> None:
    events = decode_all(b": ping\n\n:\nfoo: bar\ndata: x\n\n: another\n\n")
    assert [e.data for e in events] == [b"x"]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_line_endings(eol: bytes) -> None:
    stream = eol.join([b"event: a", b"data: 1", b"", b"data: 2", b"data: 3", b"", b""])
    events = decode_all(stream)
    assert [(e.event, e.data) for e in events] == [("a", b"1"), ("message", b"2\n3")]


def test_crlf_split_between_feeds_is_one_line_ending() -> None:
    # "\r" ends one feed and "\n" starts the next: that is one line end, not two,
    # so the event must not be dispatched early with half its data.
    events = decode_all(b"data: a\r", b"\ndata: b\r", b"\n\r\n")
    assert [e.data for e in events] == [b"a\nb"]


def test_priming_event_with_empty_data() -> None:
    events = decode_all(b"id: 2e9c\ndata: \n\nevent: message\nid: 7664\ndata: {}\n\n")
    assert events[0] == SSEEvent(data=b"", id="2e9c")
    assert events[1] == SSEEvent(data=b"{}", id="7664")


def test_block_without_data_is_not_dispatched_but_id_and_retry_stick() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"id: 5\nretry: 500\n\n") == []
    assert dec.last_event_id == "5"
    assert dec.retry == 500
    (ev,) = dec.feed(b"data: x\n\n")
    assert ev.id == "5"
    assert ev.retry is None


def test_retry_must_be_digits() -> None:
    dec = SSEDecoder()
    dec.feed(b"retry: 5s\ndata: x\n\n")
    assert dec.retry is None


def test_a_retry_of_thousands_of_digits_is_ignored() -> None:
    # Converting it would raise (Python refuses int() of over 4,300 digits), or give a
    # wait no float can hold.
    for digits in (400, 5000):
        dec = SSEDecoder()
        (ev,) = dec.feed(b"retry: " + b"9" * digits + b"\ndata: x\n\n")
        assert (ev.data, ev.retry, dec.retry) == (b"x", None, None)
        point = ResumePoint()
        point.update(dec)
        assert point.delay == DEFAULT_RETRY


def test_an_event_of_empty_data_lines_costs_its_bytes_not_more() -> None:
    # Each "data" line adds a byte to the event; what the decoder holds for it must not
    # be a multiple of that (a list entry per line would be eight bytes each).
    limit = 1 << 20
    dec = SSEDecoder(limit)
    tracemalloc.start()
    try:
        with pytest.raises(SSEError):
            for _ in range(2 * limit // 65536):
                dec.feed(b"data\n" * 65536)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * limit, peak


def test_a_large_event_that_comes_in_pieces_is_held_once() -> None:
    # Its bytes are kept where they will be its data: no copy of the line, nor of its
    # value, nor of the data once the event is complete.
    size = 8 << 20
    head, body = b"data: ", b"x" * size
    dec = SSEDecoder(2 * size)
    tracemalloc.start()
    try:
        events: list[SSEEvent] = dec.feed(head)
        for start in range(0, size, 65536):
            events += dec.feed(body[start : start + 65536])
            assert dec.held >= start
        events += dec.feed(b"\n\n")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (ev,) = events
    assert ev.data == body
    assert peak < 1.3 * size, peak
    assert dec.held == 0


def test_lines_that_carry_no_data_cost_a_unit_and_their_bytes() -> None:
    # What reading a stream costs besides its events' data (``protocol.pacing.read_budget``).
    dec = SSEDecoder()
    dec.feed(b": ping\n\nid: 1\nevent: x\ndata: a\ndata: b\n\n:")
    # The comment, two blank lines, the id and event lines.
    assert dec.line_cost == 5 + skipped(6 + 5 + 8)
    dec.feed(b" split comment\nfoo: bar\n")
    assert dec.line_cost == 7 + skipped(19 + 15 + 8)


@pytest.mark.parametrize("line", [b"data\r", b"data: a\n", b"data:\r\n"])
def test_data_lines_of_an_event_not_yet_complete_cost_nothing_until_it_is(
    line: bytes,
) -> None:
    # An honest answer may be one event of many lines: what it is decides its cost.
    whole, pieces = SSEDecoder(), SSEDecoder()
    assert whole.feed(line * 1000) == []
    for i in range(0, 1000 * len(line), 7):
        assert pieces.feed((line * 1000)[i : i + 7]) == []
    assert whole.line_cost == pieces.line_cost == 0
    (ev,) = whole.feed(b"\r")
    assert data_cost(ev, answered=False) == cost(ev.data) >= 1000


@pytest.mark.parametrize("line", [b"data\r", b"data: a\n"])
def test_data_lines_past_one_each_free_line_bytes_cost_a_unit_each_as_they_come(
    line: bytes,
) -> None:
    # An event that never ends is paced like any flood once past what an answer has.
    dec = SSEDecoder(max_event=FREE_LINE_BYTES * 100)
    dec.feed(line * 300)
    assert dec.line_cost == 200
    (ev,) = dec.feed(b"\r")
    assert dec.line_cost + data_cost(ev, answered=False) == 1 + cost(ev.data)
    assert dec.line_cost + data_cost(ev, answered=True) == 1  # the blank line alone


@pytest.mark.parametrize("step", [None, 7])
def test_an_event_cut_for_its_size_costs_its_lines_not_its_bytes(step: int | None) -> None:
    dec = SSEDecoder(max_event=1000)
    stream = b"data\n" * 900 + b"data: " + b"x" * 200
    with pytest.raises(EventTooLarge):
        for i in range(0, len(stream), step or len(stream)):
            dec.feed(stream[i : i + (step or len(stream))])
    # Its 900 whole lines and the one it was cut in; its bytes, read cheaply, are not
    # charged (an honest result too large to pass on must not hold its server back).
    assert 901 <= dec.line_cost < 901 + skipped(1000)


def test_an_event_of_one_long_line_cut_for_its_size_costs_a_line() -> None:
    dec = SSEDecoder(max_event=1000)
    with pytest.raises(EventTooLarge):
        dec.feed(b"data: " + b"x" * 5000)
    assert dec.line_cost == 1


def test_a_complete_event_adds_its_cost_or_nothing_as_an_answer() -> None:
    dec = SSEDecoder()
    (ev,) = dec.feed(b"data: " + b"x" * 1000 + b"\ndata: y\n\n")
    assert dec.line_cost + data_cost(ev, answered=False) == 1 + cost(ev.data)
    assert dec.line_cost + data_cost(ev, answered=True) == 1  # the blank line alone


@pytest.mark.parametrize(
    "line", [b":" + b"x" * 99_999, b"x-padding: " + b"x" * 99_989, b"event: " + b"x" * 99_993]
)
def test_a_long_line_that_carries_no_data_costs_its_bytes_however_it_comes(line: bytes) -> None:
    # Thrown away or kept, it was read: its length costs as an event's data would.
    assert len(line) == 100_000
    whole = SSEDecoder()
    whole.feed(line + b"\n")
    assert whole.line_cost == 1 + skipped(100_000)
    pieces = SSEDecoder()
    for i in range(0, len(line), 4096):
        pieces.feed(line[i : i + 4096])
    pieces.feed(b"\n")
    assert pieces.line_cost == 1 + skipped(100_000)


def test_id_with_nul_is_ignored() -> None:
    (ev,) = decode_all(b"id: a\0b\ndata: x\n\n")
    assert ev.id is None


def test_field_without_colon() -> None:
    (ev,) = decode_all(b"data\n\n")
    assert ev.data == b""


def test_bom_is_skipped_even_when_split() -> None:
    events = decode_all(b"\xef", b"\xbb", b"\xbfdata: x\n\n")
    assert [e.data for e in events] == [b"x"]


@pytest.mark.parametrize(
    "tail",
    [b"data: last\n", b"data: last", b'data: {"jsonrpc": "2.0",', b"data: a\r\ndata: b\r"],
    ids=["after its data line", "inside its data line", "inside a message", "after a CR"],
)
def test_an_event_the_stream_ends_inside_is_dropped(tail: bytes) -> None:
    dec = SSEDecoder()
    assert [e.data for e in dec.feed(b"data: whole\n\n" + tail)] == [b"whole"]
    assert dec.flush() == []
    assert dec.held == 0


def test_flush_on_clean_end_yields_nothing() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: x\n\n") != []
    assert dec.flush() == []


def test_event_over_the_limit_raises_without_buffering_more() -> None:
    dec = SSEDecoder(max_event=100)
    dec.feed(b"data: " + b"x" * 60 + b"\n")
    with pytest.raises(SSEError, match="larger than 100"):
        dec.feed(b"data: " + b"y" * 60 + b"\n")
    with pytest.raises(SSEError):
        dec.feed(b"\n")


def test_unterminated_line_over_the_limit_raises() -> None:
    dec = SSEDecoder(max_event=1000)
    with pytest.raises(SSEError):
        for _ in range(100):
            dec.feed(b"z" * 50)


def test_limit_resets_between_events() -> None:
    dec = SSEDecoder(max_event=100)
    for _ in range(10):
        (ev,) = dec.feed(b"data: " + b"x" * 80 + b"\n\n")
        assert len(ev.data) == 80


_STREAM = (
    b"\xef\xbb\xbf: hello\r\n"
    b"id: 1\r\ndata: \r\n\r\n"
    b'event: message\ndata: {"jsonrpc":"2.0",\n'
    b'data: "method":"n"}\n\n'
    b"retry: 10\rdata: a\rdata: b\r\r"
    b"event: other\ndata: \xc3\xa9\n\n"
)


@given(st.lists(st.integers(min_value=0, max_value=len(_STREAM)), max_size=12))
def test_any_split_gives_the_same_events(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    chunks = [_STREAM[a:b] for a, b in zip([0, *points], [*points, len(_STREAM)], strict=True)]
    assert decode_all(*chunks) == decode_all(_STREAM)


def test_reference_stream() -> None:
    events = decode_all(_STREAM)
    assert events == [
        SSEEvent(data=b"", id="1"),
        SSEEvent(data=b'{"jsonrpc":"2.0",\n"method":"n"}', id="1"),
        SSEEvent(data=b"a\nb", id="1", retry=10),
        SSEEvent(data="é".encode(), event="other", id="1"),
    ]


def test_resume_id_is_the_id_of_the_last_complete_event() -> None:
    dec = SSEDecoder()
    assert dec.resume_id is None
    dec.feed(b"id: prime\nretry: 500\n\n")  # an event with no data still counts
    assert (dec.resume_id, dec.retry) == ("prime", 500)
    dec.feed(b"id: 2\ndata: {}\n\nid: 3\ndata: {")  # the second is cut short
    assert dec.resume_id == "2"
    assert dec.last_event_id == "3"
    dec.flush()  # the stream's end does not complete the event it cut
    assert dec.resume_id == "2"


def test_resume_delay_is_the_servers_retry_or_a_second() -> None:
    point = ResumePoint()
    assert point.delay == DEFAULT_RETRY == 1.0
    point.retry_ms = 500
    assert point.delay == 0.5


def test_a_resume_point_keeps_the_last_id_a_header_can_carry() -> None:
    point = ResumePoint()
    dec = SSEDecoder()
    dec.feed(b"id: a1\nretry: 250\ndata: x\n\n")
    point.update(dec)
    assert (point.event_id, point.retry_ms, point.delay) == ("a1", 250, 0.25)
    # A resumed stream that named no id of its own resumes from the same place.
    point.update(SSEDecoder())
    assert (point.event_id, point.retry_ms) == ("a1", 250)
    # An id no header can carry is not sent back to the server.
    bad = SSEDecoder()
    bad.feed("id: caf\u00e9\ndata: x\n\n".encode())
    point.update(bad)
    assert point.event_id == "a1"
