"""An HTTP connection on a profile's own socket, as a reload that removes the profile
ends it (``sockets.Leave``), the way a line connection ends (``ending``).

The request it is answering then is given the grace a line connection's are, and once
that is over it is answered with why not; a ``subscriptions/listen`` or an event stream
it carries ends at once, with its last word. A request the client sent behind it, before
the reload or since, is refused with 503 and why (a notification or an answer to a
server still goes through), as is one still arriving, until the grace is over. The
answer with nothing more of the client's read behind it says the connection closes, and
it does once that answer is written: a client told so knows that whatever it sent later
was not read. A connection waiting for its next request, none of which has come, closes
at once, as a line connection with nothing in flight does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

import h11
import msgspec
import trio

from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc

from ..connection.ending import late_while_ending, refused_while_ending
from ..entry.sockets import Leave
from .wire import Reject, Wire

_REFUSED: Final = 503
_encode: Final = msgspec.json.Encoder().encode


async def serve_until_left(
    leave: Leave | None, wire: Wire, serve: Callable[[], Awaitable[None]]
) -> None:
    """Run ``serve`` (the connection's requests, one after another), ending the
    connection as its profile's removal asks (``leave``; None: not on a profile's
    socket)."""
    if leave is None:
        await serve()
        return
    leave.winds_down = True
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_close_when_asked, leave, wire)
        await serve()
        nursery.cancel_scope.cancel()


async def _close_when_asked(leave: Leave, wire: Wire) -> None:
    await leave.asked.wait()
    wire.leaving = True
    conn = wire.conn
    if conn.our_state is h11.IDLE and conn.their_state is h11.IDLE and not conn.trailing_data[0]:
        leave.scope.cancel()  # waiting for a request, none of it come: nothing in flight
    # A client that keeps sending is refused for the grace, not kept on past it.
    await trio.sleep_until(leave.deadline)
    wire.closing = True


def leaving_refusal(
    leave: Leave | None, wire: Wire, request: h11.Request, body: bytes
) -> Reject | None:
    """The answer to a request read once its connection is ending (None: it is not, or
    the request is served all the same): for MCP, a JSON-RPC error of the request's id,
    as a line agent is told. As on a line connection, a notification (a cancellation)
    or the answer to what a server asked the agent still goes through: a call in flight
    may wait for it."""
    if leave is None or not leave.asked.is_set():
        return None
    wire.leaving = True  # were it not yet: its answer says whether the connection closes
    message = refused_while_ending(leave.reason)
    if request.target.partition(b"?")[0] != b"/mcp":
        return Reject(_REFUSED, _encode({"error": message}))
    try:
        sent = envelope.decode_message(body) if request.method == b"POST" else None
    except rpc.DecodeFailure:
        sent = None
    if sent is not None and not isinstance(sent, rpc.Request):
        return None
    rid = None if sent is None else sent.id
    return Reject(_REFUSED, rpc.encode_error(rid, -32000, message))


class Grace:
    """The time a request in flight on an ending connection is given to be answered."""

    def __init__(self, leave: Leave | None, ends_now: Callable[[], None] | None) -> None:
        """``leave``: the connection's (None: not on a profile's socket, it never
        ends so); ``ends_now``: what ends the request at once when it does (a listen's
        final response)."""
        self._leave = leave
        self._ends_now = ends_now
        self._over = False

    async def keep(self, scope: trio.CancelScope) -> None:
        """Once the connection ends: the request ends now if it may, and once the grace
        is over its ``scope`` is cancelled (``late`` says why)."""
        leave = self._leave
        if leave is None:
            return
        await leave.asked.wait()
        if self._ends_now is not None:
            self._ends_now()
        await trio.sleep_until(leave.deadline)
        self._over = True
        scope.cancel()

    def late(self, rid: rpc.Id) -> bytes | None:
        """The answer to the request ``rid`` cut short by the grace's end (None: it was
        not)."""
        leave = self._leave
        if leave is None or not self._over:
            return None
        return rpc.encode_error(rid, -32000, late_while_ending(leave.reason, leave.grace))
