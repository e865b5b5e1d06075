"""How large a request's head may be, and what a refusal says of it.

A head's line and headers are bounded together; on the TCP endpoint the values of a
browser's ``Cookie`` headers have room of their own beside (``COOKIE_ROOM``). The same
bound holds a body's trailer, and a chunk's size line while it has not ended (h11 keeps
nothing of it but the size). A head is measured as written plainly (one space or
``: `` between the parts, each line ended by CRLF).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import h11

# A request's line and headers together, its cookies' values aside, and a body's
# trailer, however their bytes arrive.
MAX_HEAD: Final = 16 * 1024
# The values of the cookie headers a browser sends beside, on the TCP endpoint: every
# cookie any page of its host set, whatever port that page was on (cookies know no
# ports), so another user's page on the same host may fill the jar. Chromium and
# Firefox keep at most 180 cookies of 4 KiB for a host; a head whose cookies fit no
# more than that is read, however full the jar, so that the page's own cookie, or a
# dashboard code, still gets the user in.
COOKIE_ROOM: Final = 768 * 1024


def over_bounds(
    method: bytes, target: bytes, fields: Iterable[tuple[bytes, bytes]], cookie_room: int
) -> str | None:
    """Why the head of ``method``, ``target`` and header ``fields`` (a trailer: no
    method) is over its bounds, given ``cookie_room`` beyond ``MAX_HEAD`` for its
    cookies; None when it is within them."""
    plain = len(method) + len(target) + len(b"  HTTP/1.1\r\n\r\n") if method else 0
    cookies = 0
    for name, value in fields:
        size = len(name) + len(b": ") + len(value) + len(b"\r\n")
        if name.lower() == b"cookie" and cookie_room:
            # Its name and line end count with the rest: so many lines, so much work.
            cookies += len(value)
            plain += size - len(value)
        else:
            plain += size
    if plain <= MAX_HEAD and plain + cookies <= MAX_HEAD + cookie_room:
        return None
    said = f"its line and headers are {plain} bytes" if method else f"its trailer is {plain} bytes"
    if cookies:
        said += f" and its cookies {cookies}"
    return f"{said}; {bounds(cookie_room)}"


def bounds(cookie_room: int) -> str:
    if not cookie_room:
        return f"at most {MAX_HEAD} bytes of line and headers are read, cookies included"
    return (
        f"at most {MAX_HEAD} bytes of line and headers are read, cookies aside, "
        f"and {MAX_HEAD + cookie_room} with them"
    )


def over_in_body() -> str:
    return f"a chunk's size line or a trailer is over {MAX_HEAD} bytes"


def unended(cookie_room: int) -> str:
    """What h11's bound on what has not ended yet refused, given ``cookie_room``."""
    return (
        f"its line and headers, or a chunk's size line or trailer, are over "
        f"{MAX_HEAD + cookie_room} bytes before their end; {bounds(cookie_room)}"
    )


class HeadTooLarge(h11.RemoteProtocolError):
    """A request's head, a chunk's size line or a trailer over its bound; the message
    says which, and the bound."""

    def __init__(self, why: str) -> None:
        super().__init__(why, error_status_hint=431)


class NoHeadRoom(h11.RemoteProtocolError):
    """A large head that finds the room the daemon keeps for large heads all taken."""

    def __init__(self, why: str) -> None:
        super().__init__(why, error_status_hint=503)
