"""Where the browser comes back to after a person authorized: a loopback listener.

``mcpd auth login`` runs it (RFC 8252 §7.3): the authorization server sends the
browser to ``http://127.0.0.1:PORT/callback?code=...&state=...``. Every local user
can reach a loopback port, so the listener takes only the redirect that carries the
login's own ``state``; anything else gets an error page and changes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Final
from urllib.parse import urlsplit

import h11
import trio

from protocol.oauth import carries_state
from protocol.oauth.ssrf import is_loopback_host, parse_address

__all__ = ["RedirectListener", "redirect_listener"]

_DONE_PAGE: Final = (
    b"<!doctype html><title>mcpd</title>"
    b"<p>mcpd received the authorization. You can close this window.</p>"
)
_NOT_THIS_LOGIN: Final = (
    b"This is not the answer to the login mcpd is waiting for; it was ignored.\n"
)
# A connection that has not sent a whole request by then is closed: whoever can
# reach the port must not be able to hold connections open for the whole login.
REQUEST_TIMEOUT: Final = 10.0


class RedirectListener:
    """Where the browser comes back to after the user authorized.

    Any local user can reach a loopback port, so only a GET on the callback path
    that carries the login's own ``state`` (``expect``) is taken: anything else gets
    an error page and the listener keeps listening, until its owner stops waiting."""

    def __init__(self, redirect_uri: str, path: str) -> None:
        self.redirect_uri = redirect_uri
        self._path = path
        self._state: str | None = None
        self._target: str | None = None
        self._received = trio.Event()

    def expect(self, state: str) -> None:
        """The ``state`` of the authorization request the browser was sent with."""
        self._state = state

    async def wait(self) -> str:
        """The request target of the redirect (path and query), once it arrives."""
        await self._received.wait()
        assert self._target is not None
        return self._target

    def _answer(self, method: bytes, target: str) -> tuple[int, str, bytes]:
        if method != b"GET" or urlsplit(target).path != self._path:
            return 404, "text/plain; charset=utf-8", b"not found\n"
        if self._target is not None and target == self._target:
            return 200, "text/html; charset=utf-8", _DONE_PAGE  # the browser, reloading
        if self._target is None and self._state and carries_state(target, self._state):
            self._target = target
            self._received.set()
            return 200, "text/html; charset=utf-8", _DONE_PAGE
        return 400, "text/plain; charset=utf-8", _NOT_THIS_LOGIN

    async def _serve(self, stream: trio.abc.Stream) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            with trio.move_on_after(REQUEST_TIMEOUT):
                while True:
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        data = await stream.receive_some(16384)
                        if not data:
                            return
                        conn.receive_data(bytes(data))
                        continue
                    if not isinstance(event, h11.Request):
                        return
                    target = event.target.decode("ascii", "replace")
                    status, kind, body = self._answer(event.method, target)
                    headers = [
                        ("Content-Type", kind),
                        ("Content-Length", str(len(body))),
                        ("Connection", "close"),
                        ("Cache-Control", "no-store"),
                    ]
                    data = conn.send(h11.Response(status_code=status, headers=headers)) or b""
                    data += conn.send(h11.Data(data=body)) or b""
                    data += conn.send(h11.EndOfMessage()) or b""
                    await stream.send_all(data)
                    return
        except (h11.ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
            return
        finally:
            await trio.aclose_forcefully(stream)


@contextlib.asynccontextmanager
async def redirect_listener(
    *, host: str = "127.0.0.1", port: int = 0, path: str = "/callback"
) -> AsyncIterator[RedirectListener]:
    """Listen on a loopback address for the authorization redirect (RFC 8252 §7.3).

    ``listener.redirect_uri`` is what to register and send; the port is the one
    given, or a free one. The listener stops when the block ends."""
    if parse_address(host) is None or not is_loopback_host(host):
        raise ValueError("the redirect listener needs a loopback IP address (RFC 8252 §8.3)")
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    listener = RedirectListener(f"http://{shown}:{bound}{path}", path)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, listener._serve, listeners)
        try:
            yield listener
        finally:
            nursery.cancel_scope.cancel()
