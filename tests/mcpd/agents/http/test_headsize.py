"""A request's head is bounded as written, its cookies with room of their own where a
browser may bring a jar filled by others, and the refusal says the bounds it applied."""

from __future__ import annotations

from mcpd.agents.http.headsize import COOKIE_ROOM, MAX_HEAD, over_bounds

LINE = len(b"GET / HTTP/1.1\r\n\r\n")


def pad(size: int) -> tuple[bytes, bytes]:
    """A header that takes ``size`` bytes as written."""
    return b"x-pad", b"p" * (size - len(b"x-pad: \r\n"))


def test_line_and_headers_are_bounded_cookies_aside_and_all_together() -> None:
    assert over_bounds(b"GET", b"/", [pad(MAX_HEAD - LINE)], 0) is None
    over = over_bounds(b"GET", b"/", [pad(MAX_HEAD - LINE + 1)], COOKIE_ROOM)
    assert over is not None and over.startswith(f"its line and headers are {MAX_HEAD + 1} bytes")
    # A cookie line's name and end count with the rest; its value within the room.
    cookies = [(b"Cookie", b"c" * COOKIE_ROOM)]
    other = pad(MAX_HEAD - LINE - len(b"Cookie: \r\n"))
    assert over_bounds(b"GET", b"/", [other, *cookies], COOKIE_ROOM) is None
    over = over_bounds(b"GET", b"/", [other, *cookies, (b"cookie", b"c")], COOKIE_ROOM)
    assert over is not None and over.startswith(f"its line and headers are {MAX_HEAD + 10}")
    assert f"and its cookies {COOKIE_ROOM + 1}" in over
    assert f"and {MAX_HEAD + COOKIE_ROOM} with them" in over


def test_without_room_cookies_count_with_the_rest() -> None:
    over = over_bounds(b"GET", b"/", [(b"Cookie", b"c" * MAX_HEAD)], 0)
    assert over is not None and "bytes of line and headers are read, cookies included" in over


def test_a_trailer_is_bounded_alone() -> None:
    assert over_bounds(b"", b"", [pad(MAX_HEAD)], 0) is None
    over = over_bounds(b"", b"", [pad(MAX_HEAD + 1)], 0)
    assert over is not None and over.startswith(f"its trailer is {MAX_HEAD + 1} bytes")
