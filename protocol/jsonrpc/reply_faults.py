"""A reply the server sent that cannot be taken, though it answered a request: one over
mcpd's line limit (``MessageTooLarge``), or one that cannot be read or taken as it is
(``MalformedReply``). Only the request it answered fails, at once, with a reason in the
same words on every transport; the server sent it, so it is up: neither is a failure
to reach the server (``transports.errors``).
"""

from __future__ import annotations


class MessageTooLarge(Exception):
    """A reply over mcpd's message limit: it was dropped, and only the request it
    answered fails. The server sent it, so it is up; this is not an availability
    failure."""

    def __init__(self, reason: str, *, size: int | None, limit: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.size = size
        self.limit = limit


def too_large_reason(label: str, size: int | None, limit: int) -> str:
    """Why a reply was dropped, in the same words for every transport: whatever mcpd
    passes on is one line, so its message limit is a line limit."""
    how = f"of {size} bytes " if size is not None else ""
    return (
        f"{label}: a reply {how}was larger than the {limit}-byte line limit "
        "(daemon.max_line_bytes) and was dropped"
    )


class MalformedReply(Exception):
    """A reply mcpd could not read (invalid UTF-8, nested too deeply, not JSON) but
    could tell which request it answered: only that request fails, at once, rather
    than wait out its time limit for an answer that already came. The server is up."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def malformed_reason(label: str, why: str) -> str:
    """Why a reply was dropped when it could not be read: ``why`` is the decoder's
    short account ("not valid UTF-8", "nested too deeply", "not JSON")."""
    return f"{label}: the reply was {why} and was dropped"
