"""Whether a 2026-07-28 server's refusal of ``server/discover`` shows it has become a
server of the legacy era (an older build deployed again at its URL, say).

A modern server must answer ``server/discover``. One that now answers it as only a
legacy server would (the method unknown, or over HTTP a 400 or 404 whose error is no
modern one, such as a legacy server's "no valid session" for a request that came
without its session) has changed eras under the session: the era learned when it was
greeted no longer holds, and every call made for that era fails. The session then
ends, and the next greeting learns the era again. An error a modern server gives
(a version refused, a header it wants, -32601 in a 404) is no such sign.
"""

from __future__ import annotations

from protocol.jsonrpc import messages as rpc
from protocol.shown.visible import quote
from transports.errors import HttpRPCError

# HTTP statuses a legacy Streamable HTTP server refuses a request without its session with.
_SESSION_REFUSALS = frozenset({400, 404})


def legacy_refusal(exc: rpc.RPCError) -> str | None:
    """Why ``exc``, a server's answer to ``server/discover``, is a legacy server's; None
    when it is not (or may be a modern server's)."""
    if exc.code in rpc.MODERN_ERROR_CODES:
        return None
    said = quote(str(exc))
    if isinstance(exc, HttpRPCError):
        status = exc.http_status
        if status == 404 and exc.code == rpc.METHOD_NOT_FOUND:
            return None  # how a modern server over HTTP says a method is unknown
        if status in _SESSION_REFUSALS:
            return f"server/discover was refused with HTTP {status} ({said})"
    if exc.code == rpc.METHOD_NOT_FOUND:
        return f"server/discover is unknown to it ({said})"
    return None
