"""A head is weighed as its bytes come, before h11 may parse it: other headers within
``MAX_HEAD`` whatever room cookies have, a ``Cookie`` line's value alone in that room,
and the room beyond ``MAX_HEAD`` taken from what all connections share."""

from __future__ import annotations

import pytest

from mcpd.agents.http.headmeter import HeadMeter, HeadRoom, OverHead
from mcpd.agents.http.headsize import COOKIE_ROOM, MAX_HEAD

START = b"GET / HTTP/1.1\r\nHost: m\r\n"


def test_small_headers_past_the_bound_are_refused_before_the_head_ends() -> None:
    meter = HeadMeter(COOKIE_ROOM, HeadRoom(COOKIE_ROOM))
    meter.feed(START)
    with pytest.raises(OverHead, match=r"its line and headers are \d+ bytes before their end"):
        for _ in range(MAX_HEAD // 5 + 1):
            meter.feed(b"x:y\r\n")
    assert not meter.ended


def test_cookie_lines_count_their_name_and_end_with_the_other_headers() -> None:
    """Many small cookie lines cost as many lines as other headers would."""
    meter = HeadMeter(COOKIE_ROOM, HeadRoom(COOKIE_ROOM))
    with pytest.raises(OverHead, match="its line and headers are"):
        meter.feed(START + b"Cookie: a\r\n" * (MAX_HEAD // 10))


def test_a_full_jar_in_one_cookie_line_is_weighed_through() -> None:
    meter = HeadMeter(COOKIE_ROOM, HeadRoom(COOKIE_ROOM))
    meter.feed(START + b"Cookie: " + b"c" * (COOKIE_ROOM // 2))
    meter.feed(b"c" * (COOKIE_ROOM // 2) + b"\r\n\r\nthe body, not weighed" + b"x" * MAX_HEAD)
    assert meter.ended
    with pytest.raises(OverHead, match=f"its cookies are {COOKIE_ROOM + 1} bytes"):
        meter.start()
        meter.feed(START + b"cookie: " + b"c" * (COOKIE_ROOM + 1) + b"\r\n\r\n")


def test_without_cookie_room_a_cookie_counts_with_the_rest() -> None:
    meter = HeadMeter(0, None)
    meter.feed(START + b"Cookie: c=1\r\n\r\n")
    assert meter.ended
    meter.start()
    with pytest.raises(OverHead, match="before their end"):
        meter.feed(START + b"Cookie: " + b"c" * MAX_HEAD)


def test_the_room_beyond_the_bound_is_shared_and_given_back() -> None:
    room = HeadRoom(COOKIE_ROOM)
    first, second = HeadMeter(COOKIE_ROOM, room), HeadMeter(COOKIE_ROOM, room)
    first.feed(START + b"Cookie: " + b"c" * (COOKIE_ROOM - 100))
    with pytest.raises(OverHead, match="the room for large heads is all taken") as refused:
        second.feed(START + b"Cookie: " + b"c" * 3 * MAX_HEAD)
    assert not refused.value.room_left
    first.release()
    assert room.held == 0
    second.start()
    second.feed(START + b"Cookie: " + b"c" * 3 * MAX_HEAD)
    assert room.held > 0
    second.release()
    assert room.held == 0


def test_a_line_like_the_blank_one_does_not_end_the_head() -> None:
    meter = HeadMeter(COOKIE_ROOM, None)
    meter.feed(START + b"a\n")
    assert not meter.ended
    meter.feed(b"\r\n")
    assert meter.ended


def _weighed(head: bytes, step: int) -> str:
    """What weighing ``head`` in pieces of ``step`` bytes came to: its end, or which
    bound it passed."""
    meter = HeadMeter(COOKIE_ROOM, HeadRoom(COOKIE_ROOM))
    try:
        for at in range(0, len(head), step):
            meter.feed(head[at : at + step])
    except OverHead as exc:
        return str(exc).split(" are ")[0]
    return f"ended {meter.ended}"


def test_a_head_weighs_the_same_however_its_bytes_are_split() -> None:
    heads = {
        START + b"x:y\r\nCOOKIE: " + b"c" * 100 + b"\r\nz:1\r\n\r\nbody": "ended True",
        START + b"x:y\r\n" * (MAX_HEAD // 5) + b"\r\n": "its line and headers",
        START + b"Cookie: a\r\n" * (MAX_HEAD // 10) + b"\r\n": "its line and headers",
        START + b"cookie: " + b"c" * (COOKIE_ROOM + 5) + b"\r\n\r\n": "its cookies",
        START + b"a\n" + b"cookie:\n" + b"\n": "ended True",
        START + b"a\n" + b"cookie:": "ended False",
        # The blank line just before what looks like a cookie's line, and a head of many
        # short cookie lines, each found where it is.
        START + b"x: 1\r\n\r\ncookie: 1\r\n": "ended True",
        START + b"x: 1\n\ncookie: 1\n": "ended True",
        START + b"cookie:\r\n" * 1000 + b"Cookie: " + b"c" * 1000 + b"\r\n\r\n": "ended True",
        START + b"cookie:\r\nx: 1\r\n" * 500 + b"\r\n": "ended True",
    }
    for head, outcome in heads.items():
        for step in (1, 2, 3, 7, 64, 65536, len(head)):
            assert _weighed(head, step) == outcome, (head[:60], step)
