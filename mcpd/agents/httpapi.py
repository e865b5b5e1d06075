"""HTTP on the agent socket, for people, monitors and HTTP-only MCP clients.

A connection whose first byte is an upper-case letter (an HTTP method; JSON-RPC lines
start with ``{``) is served by h11 instead of the line protocol:

- ``GET /status``: the status JSON, as ``mcpd status --json`` prints it
- ``GET /tools``: the aggregated tools; ``?format=anthropic|openai|openai-responses``
- ``GET /healthz``: 200 when every server is available, else 503 with the reasons
- ``GET /metrics``: Prometheus text
- ``POST /mcp``: Streamable HTTP MCP in both eras, answered by the socket's own
  dispatch (a modern request stands alone; ``initialize`` opens a legacy session
  named by ``Mcp-Session-Id``, which DELETE ends)

so ``curl --unix-socket /run/mcpd/mcpd.sock http://mcpd/status`` works. Who may
connect is decided by the socket's mode and ``allow_uids``/``allow_groups``, as
for agents.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import socket
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import parse_qs

import h11
import msgspec
import trio

from protocol import jsonrpc as rpc
from protocol import mcp
from protocol.server import ServerSession

from .backend import Control, Servers
from .connection import Connection, Dispatcher
from .formats import FORMATS, translate
from .http_wire import HeaderList, Headers, Reject, Response, Wire, head, refuse
from .mcp_http import MODERN_STATUS, check_post, decode_body, modern_request, rpc_reject
from .peers import Peer

_REQUEST_TIMEOUT = 30.0

logger = logging.getLogger("mcpd.http")

MAX_SESSIONS: Final = 256
ENDPOINTS: Final = ("/status", "/tools", "/healthz", "/metrics", "/mcp")
_encode: Final = msgspec.json.Encoder().encode
METRICS_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"


# A method token and its space ("GET ", "POST "), or as much of one as has arrived.
_REQUEST_LINE: Final = re.compile(rb"[A-Z]{1,7}(?: |\Z)")


async def is_http(stream: trio.SocketStream) -> bool:
    """Whether the peer opened with an HTTP request line; nothing is consumed."""
    try:
        first: bytes = await stream.socket.recv(8, socket.MSG_PEEK)
    except OSError:
        return False
    # One capital letter was enough before: an agent whose first line was a banner or
    # garbage ("Hello", "F\r...") became an HTTP client that never got an answer.
    return _REQUEST_LINE.match(first) is not None


class _Exchange(Connection):
    """One HTTP request in the shape ``Api.dispatch`` expects of an agent connection.

    What a handler sends before its answer (progress, a subscription's
    acknowledgement) goes through ``outbox`` into the response, which then becomes an
    event stream. There is no line framing or socket writer here, so the line
    connection's constructor is deliberately not run.
    """

    def __init__(
        self, handler: Dispatcher, session: ServerSession, peer: Peer | None, version: int
    ) -> None:
        self.handler = handler
        self.session = session
        self.peer = peer
        self.subscriptions: set[rpc.Id] = set()
        self.seen_version = version
        self.inflight = {}
        self.dropped = 0
        self._nursery = None
        self.outbox, self._inbox = trio.open_memory_channel[bytes](256)

    def progress_sender(self) -> Callable[[mcp.ProgressParams], None]:
        def deliver(params: mcp.ProgressParams) -> None:
            self.send_nowait(rpc.encode_notification("notifications/progress", params))

        return deliver

    async def send(self, data: bytes, rid: rpc.Id | None = None) -> None:
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            await self.outbox.send(data)

    def send_nowait(self, data: bytes) -> None:
        try:
            self.outbox.send_nowait(data)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            self.dropped += 1

    async def drain(self) -> None:
        await trio.lowlevel.checkpoint()

    async def pump(self, response: Response, done: trio.Event) -> None:
        try:
            async with self._inbox:
                async for data in self._inbox:
                    await response.event(data)
        finally:
            done.set()


class _Legacy:
    def __init__(self, session: ServerSession) -> None:
        self.session = session
        self.requests: dict[rpc.Id, trio.CancelScope] = {}

    def close(self) -> None:
        for scope in self.requests.values():
            scope.cancel()


class HttpApi:
    def __init__(
        self,
        handler: Dispatcher,
        servers: Servers,
        control: Control,
        listeners: set[Connection],
        new_session: Callable[[], ServerSession],
    ) -> None:
        self.handler = handler
        self.servers = servers
        self.control = control
        # A listen over HTTP gets the list changes the socket's agents get.
        self.listeners = listeners
        self.new_session = new_session
        # Modern requests carry everything they need: one session answers them all.
        self.stateless = new_session()
        self.sessions: dict[str, _Legacy] = {}
        self.open = 0

    async def connection(self, stream: trio.SocketStream, peer: Peer | None) -> None:
        wire = Wire(stream)
        self.open += 1
        try:
            async with stream:
                if self.open > self.control.settings.max_connections:
                    await _send(wire, 503, "application/json", b'{"error":"too many connections"}')
                    return
                while await self._exchange(wire, peer):
                    done = wire.conn.our_state is h11.DONE and wire.conn.their_state is h11.DONE
                    if wire.broken or not done:
                        break
                    wire.conn.start_next_cycle()
        except h11.RemoteProtocolError as exc:
            await refuse(wire, exc.error_status_hint)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception:
            # One broken exchange must not take the daemon (or anyone else) down.
            logger.exception("HTTP connection failed")
        finally:
            self.open -= 1

    async def _exchange(self, wire: Wire, peer: Peer | None) -> bool:
        try:
            # A client that starts a request and goes quiet must not hold a connection
            # slot forever; idle keep-alive connections wait under the same limit.
            with trio.move_on_after(_REQUEST_TIMEOUT) as waited:
                request = await wire.read_request()
            if waited.cancelled_caught:
                logger.info(
                    "closing an HTTP connection on the agent socket: no complete "
                    "request within %.0f s",
                    _REQUEST_TIMEOUT,
                )
                return False
            if request is None:
                return False
            await self._route(wire, *request, peer)
        except Reject as rejection:
            await Response(wire).json(rejection.status, rejection.body, rejection.headers)
        return True

    async def _route(
        self, wire: Wire, request: h11.Request, body: bytes, peer: Peer | None
    ) -> None:
        path, _, query = request.target.decode("latin-1").partition("?")
        if path == "/mcp":
            await self._mcp(wire, request, body, peer)
            return
        pages: dict[str, Callable[[dict[str, list[str]]], tuple[int, str, bytes]]] = {
            "/status": self._status,
            "/tools": self._tools,
            "/healthz": self._healthz,
            "/metrics": self._metrics,
        }
        page = pages.get(path.rstrip("/") or "/")
        if page is None:
            raise Reject(404, _encode({"error": f"no page {path}", "pages": ENDPOINTS}))
        if request.method not in (b"GET", b"HEAD"):
            raise Reject(405, headers=[(b"allow", b"GET, HEAD")])
        status, content_type, content = page(parse_qs(query))
        await _send(wire, status, content_type, content, head_only=request.method == b"HEAD")

    # -- pages --

    def _status(self, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        return 200, "application/json", _encode(self.control.status())

    def _tools(self, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        tools = msgspec.json.decode(b"[" + b",".join(self.servers.listing()) + b"]")
        fmt = (query.get("format") or ["mcp"])[0]
        if fmt == "mcp":
            return 200, "application/json", _encode({"tools": tools})
        if fmt not in FORMATS:
            known = ", ".join(["mcp", *FORMATS])
            raise Reject(400, _encode({"error": f"unknown format {fmt!r}; use one of {known}"}))
        return 200, "application/json", _encode(translate(tools, fmt))

    def _healthz(self, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        states = self.servers.states()
        down = [s for s in states if not s["available"]]
        if not self.control.ready:
            body = {"status": "starting", "servers": down}
        elif down:
            body = {"status": "unavailable", "servers": down}
        else:
            return 200, "application/json", _encode({"status": "ok", "servers": len(states)})
        return 503, "application/json", _encode(body)

    def _metrics(self, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        return 200, METRICS_TYPE, self.control.metrics().encode()

    # -- POST /mcp --

    def _exchange_for(self, session: ServerSession, peer: Peer | None) -> _Exchange:
        return _Exchange(self.handler, session, peer, self.servers.version)

    async def _mcp(self, wire: Wire, request: h11.Request, body: bytes, peer: Peer | None) -> None:
        headers = Headers(request.headers)
        if request.method == b"DELETE":
            sid = headers.get("mcp-session-id")
            legacy = self.sessions.pop(sid, None) if sid is not None else None
            if legacy is None:
                raise rpc_reject(404, None, rpc.INVALID_REQUEST, "Session not found")
            legacy.close()
            await Response(wire).json(200, b"")
            return
        if request.method != b"POST":
            # No stream for unsolicited messages: list changes come on a listen instead.
            raise Reject(405, headers=[(b"allow", b"POST, DELETE")])
        check_post(headers)
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in self.stateless.legacy_versions:
            await self._modern(wire, headers, body, version, peer)
        else:
            await self._legacy(wire, headers, body, peer)

    async def _modern(
        self, wire: Wire, headers: Headers, body: bytes, version: str, peer: Peer | None
    ) -> None:
        req, _ = modern_request(headers, body, version, self.stateless)
        exchange = self._exchange_for(self.stateless, peer)
        await self._answer(wire, exchange, req, trio.CancelScope(), modern=True)

    async def _legacy(self, wire: Wire, headers: Headers, body: bytes, peer: Peer | None) -> None:
        msg = decode_body(body)
        if isinstance(msg, rpc.Request) and msg.method == "initialize":
            session = self.new_session()
            reply = self.handler.answer_now(self._exchange_for(session, peer), msg)
            extra: HeaderList = []
            if session.legacy_version is not None:
                if len(self.sessions) >= MAX_SESSIONS:
                    self.sessions.pop(next(iter(self.sessions))).close()
                sid = secrets.token_hex(16)
                self.sessions[sid] = _Legacy(session)
                extra.append((b"mcp-session-id", sid.encode()))
            await Response(wire).json(200, reply, extra)
            return
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            raise rpc_reject(400, None, rpc.INVALID_REQUEST, "Bad Request: Missing session ID")
        legacy = self.sessions.get(session_id)
        if legacy is None:
            raise rpc_reject(404, None, rpc.INVALID_REQUEST, "Session not found")
        if isinstance(msg, rpc.Notification):
            if msg.method == "notifications/cancelled":
                _cancel(legacy, msg)
            raise Reject(202)
        if not isinstance(msg, rpc.Request):
            raise Reject(202)  # an answer to a request; mcpd sends agents none
        if msg.id in legacy.requests:
            raise rpc_reject(400, msg.id, rpc.INVALID_REQUEST, f"Request id {msg.id!r} is in use")
        scope = legacy.requests[msg.id] = trio.CancelScope()
        try:
            exchange = self._exchange_for(legacy.session, peer)
            await self._answer(wire, exchange, msg, scope, modern=False)
        finally:
            legacy.requests.pop(msg.id, None)

    async def _answer(
        self,
        wire: Wire,
        exchange: _Exchange,
        req: rpc.Request,
        scope: trio.CancelScope,
        *,
        modern: bool,
    ) -> None:
        response = Response(wire, scope)
        reply: bytes | None = None
        # A listen gets the list changes the socket's agents get.
        listening = req.method == "subscriptions/listen"
        if listening:
            self.listeners.add(exchange)
        try:
            async with trio.open_nursery() as nursery:

                async def cancel_on_hangup() -> None:
                    # Closing the connection is how a client cancels (2026-07-28).
                    await wire.wait_gone()
                    scope.cancel()

                pumped = trio.Event()
                nursery.start_soon(cancel_on_hangup)
                nursery.start_soon(exchange.pump, response, pumped)
                with scope:
                    reply = await self.handler.dispatch(exchange, req)
                exchange.outbox.close()
                await pumped.wait()
                nursery.cancel_scope.cancel()
        finally:
            if listening:
                self.listeners.discard(exchange)
        if wire.broken:
            return
        status = 200
        if reply is not None and modern:
            decoded = rpc.decode_message(reply)
            if isinstance(decoded, rpc.ErrorResponse):
                status = MODERN_STATUS.get(decoded.error.code, 200)
        await response.finish(reply, status)


def _cancel(legacy: _Legacy, msg: rpc.Notification) -> None:
    try:
        target = rpc.decode_as(msg.params, mcp.CancelledParams).requestId
    except rpc.InvalidParams:
        return
    scope = legacy.requests.get(target) if isinstance(target, int | str) else None
    if scope is not None:
        scope.cancel()


async def _send(
    wire: Wire, status: int, content_type: str, body: bytes, *, head_only: bool = False
) -> None:
    fields = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
    ]
    events: list[Any] = [head(status, fields)]
    if not head_only:
        events.append(h11.Data(data=body))
    await wire.send(*events, h11.EndOfMessage())
