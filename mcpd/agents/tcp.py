"""The HTTP endpoint on TCP, for hosts that take a URL instead of spawning a command.

``[daemon] http_listen = "127.0.0.1:8765"`` serves the agent socket's HTTP side
(``POST /mcp`` in both eras, ``/status``, ``/healthz``, ``/tools``, ``/metrics``: the
very same code, ``HttpApi``) on that address, with two checks the Unix socket does not
need, since its file mode already says who may connect:

- ``Authorization: Bearer TOKEN`` on every request, the token from ``mcpd token``
  (401 without it or with another);
- the ``Origin`` header, when a browser sends one, must be this endpoint's own
  (``http://127.0.0.1:PORT``, ``http://localhost:PORT``, ``http://[::1]:PORT``) or one
  listed in ``http_origins``: a web page elsewhere that resolves its name to 127.0.0.1
  (DNS rebinding) gets 403, as the MCP transport requires.

``?profile=NAME`` picks the profile (any: whoever has the token is the daemon's user).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Iterable

import h11
import msgspec
import trio

from protocol import jsonrpc as rpc

from .http_wire import Headers, Reject

logger = logging.getLogger("mcpd.http")

Guard = Callable[[h11.Request], None]


class Connect(msgspec.Struct):
    """Where the endpoint listens, as hosts are told to reach it."""

    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/mcp"


def own_origins(host: str, port: int, extra: Iterable[str] = ()) -> frozenset[str]:
    names = {"127.0.0.1", "localhost", "[::1]", f"[{host}]" if ":" in host else host}
    return frozenset({f"http://{n}:{port}" for n in names} | {o.lower() for o in extra})


def guard(token: Callable[[], str], origins: frozenset[str]) -> Guard:
    """The checks every request on the endpoint passes before it is routed."""

    def check(request: h11.Request) -> None:
        headers = Headers(request.headers)
        origin = headers.get("origin")
        if origin is not None and origin.rstrip("/").lower() not in origins:
            raise Reject(403, _refusal(f"Forbidden: the Origin {origin!r} is not allowed"))
        scheme, _, presented = (headers.get("authorization") or "").partition(" ")
        try:
            want = token()
        except Exception as exc:  # an unreadable token file refuses all, and says why
            logger.error("HTTP endpoint: %s", exc)
            raise Reject(503, _refusal(f"mcpd cannot check tokens now: {exc}")) from None
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            presented.strip().encode(), want.encode()
        ):
            raise Reject(
                401,
                _refusal("Unauthorized: mcpd wants its bearer token (`mcpd token` prints it)"),
                [(b"www-authenticate", b'Bearer realm="mcpd"')],
            )

    return check


def _refusal(message: str) -> bytes:
    # A JSON-RPC error without an id: what MCP clients show their users; curl shows it too.
    return rpc.encode_error(None, -32001, message)


async def open_endpoint(host: str, port: int) -> tuple[list[trio.SocketListener], Connect]:
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()
    return listeners, Connect(host, int(bound[1]))
