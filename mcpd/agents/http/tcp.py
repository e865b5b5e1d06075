"""The HTTP endpoint on TCP, for hosts that take a URL instead of spawning a command.

``[daemon] http_listen = "127.0.0.1:8765"`` serves the agent socket's HTTP side
(``POST /mcp`` in both eras, ``/status``, ``/healthz``, ``/tools``, ``/metrics``: the
very same code, ``HttpSide``) on that address, with two checks the Unix socket does not
need, since its file mode already says who may connect:

- ``Authorization: Bearer TOKEN`` on every request, the token from ``mcpd token``
  (401 without it or with another);
- the ``Origin`` header, when a browser sends one, must be this endpoint's own (the
  addresses it holds, such as ``http://127.0.0.1:PORT``, and ``http://localhost:PORT``
  where it holds both loopback addresses: ``own_names``) or one listed in
  ``http_origins``: a web page elsewhere that resolves its name to 127.0.0.1 (DNS
  rebinding) gets 403, as the MCP transport requires. A page at an allowed
  origin may read the answers, and its browser's preflight is answered without the
  token (``cors``).

``?profile=NAME`` picks the profile (any: whoever has the token is the daemon's user).

The status page (``GET /``, ``/page/...``) is for browsers, which cannot send the
token: a request for it without an ``Authorization`` header passes to the page, which
wants its own session cookie (``mcpd dashboard``), once its ``Host`` has shown it was
meant for this endpoint (a page elsewhere that rebinds its name to 127.0.0.1 sends its
own name).

Both are checked as soon as a request's headers are in, before a byte of its body is
read: a stranger costs no more than its headers. A new connection waits for its first
headers in a lobby of its own (``EndpointDoor``, ``lobby.Lobby``), apart from the clients that
got in and from the Unix socket's connections, for ``http_header_timeout`` at most.
When the lobby is full, a newcomer pushes out the longest waiting connection of the
address that holds the most places. So a flood of silent connections holds a bounded
number of descriptors and never turns away a client whose headers come with its
connection; a flood from other addresses never pushes out a client that is slow to
send its headers. But a flood from the client's own address (on loopback, any local
program's) cannot be told from the client: there a slow client is pushed out once as
many connections as the lobby has places have come after it, and is served only if
its headers come sooner than that.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import socket as stdsocket
from collections.abc import Awaitable, Callable, Iterable
from typing import Final

import h11
import msgspec
import trio

from protocol.jsonrpc import messages as rpc
from protocol.pacing.buckets import Throttle
from protocol.shown.logfields import log_extra

from ...config.checks.endpoints import is_localhost, parse_listen, url_host
from ..daemon_seam import DaemonForAgents
from ..page import is_page
from .cors import answering, is_preflight, preflight
from .lobby import Lobby, source_of
from .wire import HeaderList, Headers, Reject, Wire, refuse_and_close

logger = logging.getLogger("mcpd.http")

Guard = Callable[[h11.Request], None]
# Connections waiting for their first headers at once. Each holds a descriptor and
# at most h11's limit on incomplete headers, so the lobby's cost is bounded.
LOBBY_SIZE: Final = 64


class Connect(msgspec.Struct):
    """Where the endpoint listens, as hosts are told to reach it: an address it holds."""

    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{url_host(self.host)}:{self.port}/mcp"


def own_names(host: str, socks: list[stdsocket.socket]) -> frozenset[str]:
    """The endpoint's names as a URL gives its host: the addresses it holds (loopback's
    too where it holds every address of a family), and ``localhost`` where it holds
    both loopback addresses, or ``http_listen``'s ``host`` was ``localhost`` (then
    ``mcpd.starting.listening`` bound both, or this machine has no ``::1``). A name for
    an address held by another could bring to mcpd a request meant for a stranger, and
    the URLs mcpd hands out send the owner there."""
    names: set[str] = set()
    for sock in socks:
        ip = ipaddress.ip_address(str(sock.getsockname()[0]).partition("%")[0])
        names.add(url_host(str(sock.getsockname()[0])))
        if ip.is_unspecified:
            names.add("127.0.0.1" if ip.version == 4 else "[::1]")
    if "127.0.0.1" in names and ("[::1]" in names or is_localhost(host)):
        names.add("localhost")
    return frozenset(names)


def own_origins(names: frozenset[str], port: int, extra: Iterable[str] = ()) -> frozenset[str]:
    """``names`` (``own_names``) as origins on ``port``, with those configured."""
    return frozenset({f"http://{n}:{port}" for n in names} | {o.lower() for o in extra})


def guard(token: Callable[[], str], origins: frozenset[str]) -> Guard:
    """The checks every request on the endpoint passes before it is routed."""

    hosts = frozenset(o.partition("://")[2] for o in origins)
    # What the journal was last told of the token file: said once, not at each request.
    said: str | None = None

    def check(request: h11.Request) -> None:
        nonlocal said
        headers = Headers(request.headers)
        for name in ("Origin", "Host"):
            # Each is checked as one: a second could say what the check never read.
            if headers.count(name.lower()) > 1:
                raise Reject(400, _refusal(f"Bad Request: more than one {name} header"))
        origin = headers.get("origin")
        if origin is not None and origin.rstrip("/").lower() not in origins:
            raise Reject(403, _refusal(f"Forbidden: the Origin {origin!r} is not allowed{_OWN}"))
        if is_page(request.target) and headers.get("authorization") is None:
            _check_host(headers, hosts)
            return
        if is_preflight(request, headers):
            # A browser's question, without the token, about what a page at an origin
            # allowed above may send: answered from the headers alone.
            _check_host(headers, hosts)
            raise preflight(request, headers)
        scheme, _, presented = (headers.get("authorization") or "").partition(" ")
        try:
            want = token()
        except Exception as exc:  # an unreadable token file refuses all, and says why
            if str(exc) != said:
                said = str(exc)
                logger.error("HTTP endpoint: %s; requests are refused until it is repaired", exc)
            raise Reject(503, _refusal(f"mcpd cannot check tokens now: {exc}")) from None
        if said is not None:
            said = None
            logger.warning("HTTP endpoint: the token file can be read again")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            presented.strip().encode(), want.encode()
        ):
            raise Reject(
                401,
                _refusal("Unauthorized: mcpd wants its bearer token (`mcpd token` prints it)"),
                [(b"www-authenticate", b'Bearer realm="mcpd"')],
            )

    return check


class EndpointDoor:
    """The endpoint's door: a connection gets in once its first request's headers come
    within ``timeout()`` seconds and pass ``check``."""

    def __init__(
        self,
        check: Guard,
        timeout: Callable[[], float],
        cors: Callable[[h11.Request], HeaderList] = lambda request: [],
    ) -> None:
        """``cors``: what the answers to a request carry for its origin
        (``cors.answering``)."""
        self.check = check
        self.cors = cors
        self._timeout = timeout
        self._lobby = Lobby(LOBBY_SIZE)
        self._let_go = Throttle()
        self._pushed_out = Throttle()

    async def admit(self, wire: Wire) -> h11.Request | None:
        """The first request's head once it passed the checks; None when the connection
        is done with (refused with its status, out of time, pushed out, or gone)."""
        timeout = self._timeout()
        scope = trio.CancelScope(deadline=trio.current_time() + timeout)
        source = source_of(wire.stream)
        pushed = self._lobby.enter(scope, source)
        if pushed is not None:
            self._log(
                self._pushed_out,
                f"more than {LOBBY_SIZE} waited for their headers; {pushed} held the most "
                "places, and its longest waiting one made room",
            )
        try:
            with scope:
                wire.carried = self.cors
                request = await wire.read_head()
                if request is None:
                    return None
                try:
                    self.check(request)
                except Reject as rejection:
                    await refuse_and_close(
                        wire, rejection.status, rejection.body, rejection.headers
                    )
                    return None
                return request
            if scope.deadline <= trio.current_time():
                self._log(
                    self._let_go,
                    f"no complete request headers within {timeout:g} s "
                    "(daemon.http_header_timeout)",
                )
            return None
        finally:
            self._lobby.leave(scope, source)

    @staticmethod
    def _log(throttle: Throttle, why: str) -> None:
        held = throttle.admit()
        if held is None:
            return
        more = f" ({held} more since the last such line)" if held else ""
        logger.warning(
            "HTTP endpoint: closed a connection before its token was checked: %s%s",
            why,
            more,
            extra=log_extra(None, reason=why),
        )


def _check_host(headers: Headers, hosts: frozenset[str]) -> None:
    """What passes without the token was meant for this endpoint: a page elsewhere that
    rebinds its name to this address sends its own name."""
    host = headers.get("host")
    if host is None or host.lower() not in hosts:
        raise Reject(403, _refusal(f"Forbidden: the Host {host!r} is not this endpoint{_OWN}"))


# What a person whose browser was refused can do: their own pages are at the address
# mcpd hands out, and another's origin is the operator's to allow.
_OWN: Final = (
    " (this endpoint is the address `mcpd dashboard` prints, and localhost only where "
    'http_listen is "localhost:PORT"; a page elsewhere needs its origin in http_origins)'
)


def _refusal(message: str) -> bytes:
    # A JSON-RPC error without an id: what MCP clients show their users; curl shows it too.
    return rpc.encode_error(None, -32001, message)


def endpoint_of(socks: list[stdsocket.socket]) -> tuple[list[trio.SocketListener], Connect]:
    """The endpoint's sockets, bound before any server started
    (``mcpd.starting.listening``), as listeners, and where hosts reach it: the first
    one's address (``127.0.0.1`` for ``localhost``) and port (the one the kernel chose,
    for port 0)."""
    listeners = [trio.SocketListener(trio.socket.from_stdlib_socket(s)) for s in socks]
    address, port = socks[0].getsockname()[:2]
    return listeners, Connect(str(address), int(port))


async def serve_endpoint(
    listen: str,
    socks: list[stdsocket.socket],
    control: DaemonForAgents,
    handle: Callable[[trio.SocketStream, EndpointDoor], Awaitable[None]],
    task_status: trio.TaskStatus[Connect] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the endpoint on ``socks``, bound for ``listen``: each connection goes to
    ``handle`` with the gate it passes first. Started once it listens, with where hosts
    reach it."""
    host, _ = parse_listen(listen)
    listeners, endpoint = endpoint_of(socks)
    origins = own_origins(own_names(host, socks), endpoint.port, control.settings.http_origins)
    check = guard(control.http_token, origins)
    gate = EndpointDoor(check, lambda: control.settings.http_header_timeout, answering(origins))
    logger.info("HTTP endpoint on %s", endpoint.url, extra=log_extra(None))

    async def handler(stream: trio.SocketStream) -> None:
        await handle(stream, gate)

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handler, listeners)
        task_status.started(endpoint)
