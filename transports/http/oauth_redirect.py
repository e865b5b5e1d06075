"""Where the browser comes back to after a person authorized: a loopback listener.

``mcpd auth login`` runs it (RFC 8252 §7.3): the authorization server sends the
browser to ``http://127.0.0.1:PORT/callback/ISSUER?code=...&state=...`` (a segment of
its own for each authorization server, ``/callback`` alone for a client registered by
hand). Every local user
can reach a loopback port, so the listener takes only redirects that carry the
login's own ``state``; anything else gets an error page and changes nothing. Even
one with the state may not be the browser's (the state can be seen on the way to
the browser), so every such redirect is handed on in turn, until the login is done.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final
from urllib.parse import urlsplit

import h11
import trio

from protocol.oauth import carries_state
from protocol.oauth.ssrf import is_loopback_host, parse_address

__all__ = ["PeerCheck", "RedirectListener", "redirect_listener"]

# Whether the program at the other end of a connection may answer the login; one it
# refuses is closed unanswered.
PeerCheck = Callable[[trio.socket.SocketType], Awaitable[bool]]

_DONE_PAGE: Final = (
    b"<!doctype html><title>mcpd</title>"
    b"<p>mcpd received the authorization; the terminal where the login runs says "
    b"whether it worked. You can close this window.</p>"
)
_NOT_THIS_LOGIN: Final = (
    b"This is not the answer to the login mcpd is waiting for; it was ignored.\n"
)
_BUSY: Final = b"mcpd has other answers to this login to try first; reload this page soon.\n"
# Redirects with the login's state waiting their turn: whoever floods the port gets
# the busy page beyond this many, rather than mcpd's memory.
WAITING: Final = 16
# Redirects already handed on, so a browser that reloads one is not handed on again.
_REMEMBERED: Final = 16
# A connection that has not sent a whole request by then is closed: whoever can
# reach the port must not be able to hold connections open for the whole login.
REQUEST_TIMEOUT: Final = 10.0
# Connections held at once, so a flood of idle ones costs the login a bounded number
# of descriptors, not all of them. A newcomer past it is taken and the oldest one that
# has not sent a whole request is closed: a flood's connections then close each other,
# while the browser's sends its request as soon as it is made.
CONNECTIONS: Final = 64
# The path of the redirect URI.
CALLBACK: Final = "/callback"


class RedirectListener:
    """Where the browser comes back to after the user authorized.

    Any local user can reach a loopback port, so only a GET on (or below) the callback
    path that carries the login's own ``state`` (``expect``) is taken: anything else gets
    an error page. What is taken is handed on once (``next``), in the order it came,
    and the listener keeps listening until its owner stops waiting."""

    def __init__(self, redirect_uri: str, admits: PeerCheck | None = None) -> None:
        self.redirect_uri = redirect_uri
        self._admits = admits
        self._state: str | None = None
        self._send, self._taken = trio.open_memory_channel[str](WAITING)
        self._seen: deque[str] = deque(maxlen=_REMEMBERED)
        # Each connection held is closed by cancelling its scope; those still to send a
        # whole request are here too, oldest first, and are the ones a newcomer displaces.
        self._unread: dict[trio.CancelScope, None] = {}
        self._answering = 0

    def expect(self, state: str) -> None:
        """The ``state`` of the authorization request the browser was sent with."""
        self._state = state

    async def next(self) -> str:
        """The request target (path and query) of the next redirect taken."""
        return await self._taken.receive()

    def _answer(self, method: bytes, target: str) -> tuple[int, str, bytes]:
        path = urlsplit(target).path
        # Below the path is each authorization server's own redirect URI; the daemon
        # tells whether it is this login's.
        if method != b"GET" or not (path == CALLBACK or path.startswith(CALLBACK + "/")):
            return 404, "text/plain; charset=utf-8", b"not found\n"
        if not self._state or not carries_state(target, self._state):
            return 400, "text/plain; charset=utf-8", _NOT_THIS_LOGIN
        if target not in self._seen:
            try:
                self._send.send_nowait(target)
            except trio.WouldBlock:
                return 503, "text/plain; charset=utf-8", _BUSY
            self._seen.append(target)
        return 200, "text/html; charset=utf-8", _DONE_PAGE

    def _make_room(self) -> bool:
        """Close the oldest connection still to send a whole request, for a newcomer;
        False when there is none (every one held is being answered)."""
        if not self._unread:
            return False
        oldest = next(iter(self._unread))
        del self._unread[oldest]
        oldest.cancel()
        return True

    async def _serve(self, stream: trio.SocketStream) -> None:
        if len(self._unread) + self._answering >= CONNECTIONS and not self._make_room():
            await trio.aclose_forcefully(stream)
            return
        scope = trio.CancelScope(deadline=trio.current_time() + REQUEST_TIMEOUT)
        self._unread[scope] = None
        conn = h11.Connection(h11.SERVER)
        try:
            with scope:
                if self._admits is not None and not await self._admits(stream.socket):
                    return
                request = await _request_of(conn, stream)
                self._unread.pop(scope, None)
                if request is None or scope.cancel_called:
                    return
                self._answering += 1
                try:
                    await stream.send_all(self._response(conn, request))
                finally:
                    self._answering -= 1
        except (h11.ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
            return
        finally:
            self._unread.pop(scope, None)
            await trio.aclose_forcefully(stream)

    def _response(self, conn: h11.Connection, request: h11.Request) -> bytes:
        target = request.target.decode("ascii", "replace")
        status, kind, body = self._answer(request.method, target)
        headers = [
            ("Content-Type", kind),
            ("Content-Length", str(len(body))),
            ("Connection", "close"),
            ("Cache-Control", "no-store"),
        ]
        data = conn.send(h11.Response(status_code=status, headers=headers)) or b""
        data += conn.send(h11.Data(data=body)) or b""
        data += conn.send(h11.EndOfMessage()) or b""
        return data


async def _request_of(conn: h11.Connection, stream: trio.abc.Stream) -> h11.Request | None:
    """The request ``stream`` sends, once its head is whole (None: it sent none)."""
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event if isinstance(event, h11.Request) else None
        data = await stream.receive_some(16384)
        if not data:
            return None
        conn.receive_data(bytes(data))


@contextlib.asynccontextmanager
async def redirect_listener(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    admits: PeerCheck | None = None,
) -> AsyncIterator[RedirectListener]:
    """Listen on a loopback address for the authorization redirect (RFC 8252 §7.3).

    ``listener.redirect_uri`` is what to register and send; the port is the one
    given, or a free one. A connection ``admits`` refuses (when given) is closed
    before its request is read. The listener stops when the block ends."""
    if parse_address(host) is None or not is_loopback_host(host):
        raise ValueError("the redirect listener needs a loopback IP address (RFC 8252 §8.3)")
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    listener = RedirectListener(f"http://{shown}:{bound}{CALLBACK}", admits)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, listener._serve, listeners)
        try:
            yield listener
        finally:
            nursery.cancel_scope.cancel()
