"""A request's head weighed as its bytes arrive, before h11 is given a chance to parse
it: its line and headers other than cookies against ``MAX_HEAD``, and its cookies
against the room a connection has for them, which the endpoint's connections share.

h11 parses a head only once it has all of it, and keeps it whole until then, so a
bound it applies after parsing costs what parsing the head cost: a head of many small
headers filling a browser's cookie room takes it far longer than one within
``MAX_HEAD``. Here only a ``Cookie`` header's value counts as cookies; its name and
line ending count with the other headers, so a head holds no more lines than one
within ``MAX_HEAD`` would.

The room beyond ``MAX_HEAD`` is taken from ``HeadRoom`` as the bytes come, and given
back once the head has ended or its connection has. So however many connections send
large heads at once, the daemon holds that much of them at most, beside ``MAX_HEAD``
for each connection; a head that finds no room left is refused, its client told to
try again.
"""

from __future__ import annotations

from typing import Final

from .headsize import COOKIE_ROOM, MAX_HEAD

# The bytes of heads beyond ``MAX_HEAD`` held at once on every connection together: a
# few browsers' full cookie jars.
HEAD_ROOM: Final = 8 * COOKIE_ROOM
_COOKIE: Final = b"cookie:"
# What a ``Cookie`` line holds beside its value, written plainly: its name, ``: `` and
# its line's end.
COOKIE_LINE: Final = len(b"cookie: \r\n")


class HeadRoom:
    """The bytes of heads beyond ``MAX_HEAD`` the daemon holds, on every connection
    together, while they have not ended."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.held = 0

    def take(self, size: int) -> bool:
        if self.held + size > self.most:
            return False
        self.held += size
        return True

    def give_back(self, size: int) -> None:
        self.held -= size


class OverHead(Exception):
    """A head over its bounds, or one with no room left for it; the message says
    which."""

    def __init__(self, why: str, room_left: bool) -> None:
        super().__init__(why)
        self.room_left = room_left


class HeadMeter:
    """Weighs one head after another on one connection: ``feed`` it what arrives while
    a head is awaited, ``start`` it again for the next one."""

    def __init__(self, cookie_room: int, room: HeadRoom | None) -> None:
        self.cookie_room = cookie_room
        self.room = room
        self._plain = 0
        self._cookies = 0
        self._taken = 0
        self._line = b""  # the start of the line being read, enough to tell its name
        self._length = 0  # the bytes of the line being read so far
        self._first = True
        self.ended = False

    def start(self) -> None:
        """Weigh the next head from its first byte."""
        self.release()
        self._plain = self._cookies = self._length = 0
        self._line = b""
        self._first = True
        self.ended = False

    def release(self) -> None:
        """Give back the room the head took (it ended, or its connection did)."""
        if self.room is not None:
            self.room.give_back(self._taken)
        self._taken = 0

    def feed(self, data: bytes | bytearray) -> None:
        """Weigh ``data``, which came next; raises OverHead once the head is over its
        bounds, or finds no room."""
        low = bytes(data).lower()
        at = 0
        while at < len(low) and not self.ended:
            if at and self._length == 0:
                # At a line's start within ``data``: the whole lines up to the next
                # that may be a cookie's or the blank one are other headers, weighed
                # at once (many small headers cost no more than one large one).
                run = _plain_run(low, at)
                self._plain += run - at
                at = run
                self._check()
                if at == len(low):
                    break
            end = low.find(b"\n", at)
            piece = low[at:] if end < 0 else low[at : end + 1]
            at += len(piece)
            self._line = (self._line + piece[: len(_COOKIE)])[: len(_COOKIE)]
            self._length += len(piece)
            if end >= 0:
                self._ended_line()
            self._check()

    def _is_cookie(self) -> bool:
        # Without room of their own, cookies count as any other header.
        return bool(self.cookie_room) and not self._first and self._line == _COOKIE

    def _ended_line(self) -> None:
        if self._line in (b"\r\n", b"\n") and not self._first:
            self.ended = True  # the blank line after the headers
            self._plain += self._length
        elif self._is_cookie():
            self._plain += COOKIE_LINE
            self._cookies += max(0, self._length - COOKIE_LINE)
        else:
            self._plain += self._length
        self._first = False
        self._line = b""
        self._length = 0

    def _check(self) -> None:
        plain, cookies = self._plain, self._cookies
        if self._is_cookie():
            plain += min(self._length, COOKIE_LINE)
            cookies += max(0, self._length - COOKIE_LINE)
        elif len(self._line) == len(_COOKIE) or b":" in self._line or self._first:
            plain += self._length
        so_far = "" if self.ended else " before their end"
        if plain > MAX_HEAD:
            raise OverHead(f"its line and headers are {plain} bytes{so_far}", True)
        if cookies > self.cookie_room:
            raise OverHead(f"its cookies are {cookies} bytes{so_far}", True)
        beyond = max(0, plain + cookies - MAX_HEAD)
        if beyond > self._taken and self.room is not None:
            if not self.room.take(beyond - self._taken):
                raise OverHead("the room for large heads is all taken; try again", False)
            self._taken = beyond


def _plain_run(low: bytes, at: int) -> int:
    """Where, from the line starting at ``at`` (just after a line's end) in ``low``, the
    first line that may be a cookie's or the blank one starts, or the last line that
    has not ended yet; every line before it ended, and is another header."""
    # The blank line is looked for only up to the next cookie's line: a head of many
    # short cookie lines would otherwise have the rest of each read searched per line.
    cookie = low.find(b"\ncookie:", at - 1)
    stop = len(low) if cookie < 0 else cookie + 3
    starts = [cookie] + [low.find(mark, at - 1, stop) for mark in (b"\n\r\n", b"\n\n")]
    found = [start + 1 for start in starts if start >= 0]
    if found:
        return min(found)
    return max(at, low.rfind(b"\n") + 1)
