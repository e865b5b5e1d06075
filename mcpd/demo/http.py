"""Streamable HTTP for a DemoServer: h11 over trio, both protocol eras on one endpoint.

Requests are routed the way the official SDK routes them: an ``MCP-Protocol-Version``
header that is not a handshake version makes the POST a stateless 2026-07-28
exchange; no header (or a handshake version) means the legacy session protocol:
``initialize`` opens a session named by ``Mcp-Session-Id``, DELETE ends it.

A response is one ``application/json`` body, unless the handler sends a
notification before it is done (progress, a subscription): then the response turns
into an event stream, the notifications first and the answer last. Closing the
connection cancels the request, which is how 2026-07-28 cancels; legacy sessions may
also send ``notifications/cancelled``.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Final, TypeAlias
from urllib.parse import urlsplit

import h11
import msgspec
import trio

from protocol import headers as mcp_headers
from protocol import jsonrpc as rpc
from protocol import mcp

if TYPE_CHECKING:
    from protocol.server import ServerSession

    from .runtime import DemoServer, Reply

log = logging.getLogger("mcpd.demo.http")

ENDPOINT: Final = b"/mcp"
MAX_BODY: Final = 4 * 1024 * 1024
MAX_SESSIONS: Final = 256
_READ_SIZE: Final = 64 * 1024
_LOCAL_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})
# The spec fixes these for 2026-07-28; every other JSON-RPC error travels as a 200.
_MODERN_STATUS: Final[Mapping[int, int]] = {
    rpc.PARSE_ERROR: 400,
    rpc.INVALID_REQUEST: 400,
    rpc.INVALID_PARAMS: 400,
    rpc.HEADER_MISMATCH: 400,
    rpc.MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    rpc.UNSUPPORTED_PROTOCOL_VERSION: 400,
    rpc.METHOD_NOT_FOUND: 404,
}

HeaderList: TypeAlias = list[tuple[bytes, bytes]]


async def serve_http(
    server: DemoServer,
    host: str,
    port: int,
    *,
    ready_file: str | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``server`` at ``http://host:port/mcp``; ``task_status`` gets the bound port.

    ``ready_file`` receives the port and a newline in one write once the socket
    listens; it may be a FIFO the parent is reading, so no one has to poll.
    """
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound: int = listeners[0].socket.getsockname()[1]
    if ready_file is not None:
        await trio.to_thread.run_sync(_write_ready, ready_file, bound, abandon_on_cancel=True)
    log.info("%s listening on http://%s:%d/mcp", server.info.name, host, bound)
    task_status.started(bound)
    await trio.serve_listeners(_HttpServer(server, host).connection, listeners)


def _write_ready(path: str, port: int) -> None:
    with open(path, "w") as f:
        f.write(f"{port}\n")


class _Reject(Exception):
    """Answer the request with this status and body, without running it."""

    def __init__(self, status: int, body: bytes = b"", headers: HeaderList | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or []


def _rpc_reject(status: int, id: rpc.Id | None, code: int, message: str) -> _Reject:
    return _Reject(status, rpc.encode_error(id, code, message))


class _Headers:
    def __init__(self, raw: Iterable[tuple[bytes, bytes]]) -> None:
        self._all: dict[str, list[str]] = {}
        for name, value in raw:
            self._all.setdefault(name.decode("ascii").lower(), []).append(value.decode("latin-1"))

    def get(self, name: str) -> str | None:
        values = self._all.get(name)
        return values[0] if values else None

    def count(self, name: str) -> int:
        return len(self._all.get(name, ()))


class _Wire:
    """One client connection: its socket and the h11 state machine reading it."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.conn = h11.Connection(h11.SERVER)
        self.peer_gone = False

    async def _receive(self) -> None:
        try:
            data = await self.stream.receive_some(_READ_SIZE)
        except trio.BrokenResourceError:
            data = b""
        if not data:
            self.peer_gone = True
        self.conn.receive_data(data)

    async def _next_event(self) -> Any:
        while (event := self.conn.next_event()) is h11.NEED_DATA:
            await self._receive()
        return event

    async def read_request(self) -> tuple[h11.Request, bytes] | None:
        request = await self._next_event()
        if not isinstance(request, h11.Request):
            return None
        body = bytearray()
        while True:
            event = await self._next_event()
            if isinstance(event, h11.EndOfMessage):
                return request, bytes(body)
            if not isinstance(event, h11.Data):
                return None
            body += event.data
            if len(body) > MAX_BODY:
                raise _Reject(413, b"request body too large")

    async def wait_gone(self) -> None:
        """Return once the client hangs up; keep whatever it pipelines meanwhile."""
        while not self.peer_gone:
            await self._receive()

    async def send(self, *events: Any) -> None:
        for event in events:
            data = self.conn.send(event)
            if data:
                await self.stream.send_all(data)


class _Response:
    """The answer to one request: a JSON body, or an event stream once one is needed."""

    def __init__(
        self,
        wire: _Wire,
        scope: trio.CancelScope | None = None,
        headers: Iterable[tuple[bytes, bytes]] = (),
    ) -> None:
        self.wire = wire
        self.scope = scope
        self.headers = list(headers)
        self.streaming = False
        self._lock = trio.Lock()

    async def json(
        self, status: int, body: bytes, headers: Iterable[tuple[bytes, bytes]] = ()
    ) -> None:
        fields = [*self.headers, *headers, (b"content-length", str(len(body)).encode())]
        if body:
            fields.append((b"content-type", b"application/json"))
        await self.wire.send(
            h11.Response(status_code=status, headers=fields),
            h11.Data(data=body),
            h11.EndOfMessage(),
        )

    async def open_stream(self) -> None:
        await self._write()

    async def event(self, message: bytes) -> None:
        """The ``Notify`` of this request: one ``message`` event."""
        await self._write(h11.Data(data=b"event: message\ndata: " + message + b"\n\n"))

    async def _write(self, *events: Any) -> None:
        # Shielded: a request cancelled halfway through an event would leave the
        # stream unreadable for the client.
        with trio.CancelScope(shield=True):
            async with self._lock:
                if self.wire.peer_gone:
                    return
                head: list[Any] = []
                if not self.streaming:
                    self.streaming = True
                    fields = [
                        *self.headers,
                        (b"content-type", b"text/event-stream"),
                        (b"cache-control", b"no-cache"),
                        (b"x-accel-buffering", b"no"),
                    ]
                    head.append(_head(200, fields))
                try:
                    await self.wire.send(*head, *events)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self.wire.peer_gone = True
                    if self.scope is not None:
                        self.scope.cancel()

    async def finish(self, reply: Reply | None, status: int) -> None:
        if reply is not None and not self.streaming:
            await self.json(status, reply.message)
            return
        # A stream (or a request cancelled before it said anything) ends here,
        # with the answer as its last event when there is one.
        if reply is not None:
            await self.event(reply.message)
        await self._write(h11.EndOfMessage())


class _LegacySession:
    def __init__(self, session: ServerSession) -> None:
        self.session = session
        self.requests: dict[rpc.Id, trio.CancelScope] = {}
        self.streams: set[trio.CancelScope] = set()

    def close(self) -> None:
        for scope in [*self.requests.values(), *self.streams]:
            scope.cancel()


class _Named(msgspec.Struct):
    name: Any = None
    uri: Any = None


class _HttpServer:
    def __init__(self, server: DemoServer, host: str) -> None:
        self.server = server
        # Modern requests carry all they need, so one session object serves them all.
        self.stateless = server.new_session()
        self.handshake_versions = frozenset(self.stateless.legacy_versions)
        self.sessions: dict[str, _LegacySession] = {}
        self.hosts = _LOCAL_HOSTS | {host}

    async def connection(self, stream: trio.SocketStream) -> None:
        wire = _Wire(stream)
        async with stream:
            try:
                while await self._exchange(wire):
                    if wire.peer_gone or wire.conn.our_state is not h11.DONE:
                        break
                    if wire.conn.their_state is not h11.DONE:
                        break
                    wire.conn.start_next_cycle()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            except h11.RemoteProtocolError as exc:
                if wire.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    status = exc.error_status_hint
                    with trio.move_on_after(1):
                        await _Response(wire).json(status, b"", [(b"connection", b"close")])

    async def _exchange(self, wire: _Wire) -> bool:
        try:
            request = await wire.read_request()
            if request is None:
                return False
            await self._route(wire, *request)
        except _Reject as rejection:
            await _Response(wire).json(rejection.status, rejection.body, rejection.headers)
        return True

    async def _route(self, wire: _Wire, request: h11.Request, body: bytes) -> None:
        headers = _Headers(request.headers)
        if request.target.partition(b"?")[0] != ENDPOINT:
            raise _Reject(404)
        origin = headers.get("origin")
        if origin is not None and urlsplit(origin).hostname not in self.hosts:
            raise _rpc_reject(403, None, rpc.INVALID_REQUEST, "Forbidden: origin not allowed")
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in self.handshake_versions:
            if request.method != b"POST":
                raise _Reject(405, headers=[(b"allow", b"POST")])
            _check_post(headers)
            await self._modern(wire, headers, body, version)
        elif request.method == b"POST":
            _check_post(headers)
            await self._legacy_post(wire, headers, body)
        elif request.method == b"GET":
            await self._legacy_stream(wire, headers)
        elif request.method == b"DELETE":
            sid, legacy = self._session(headers)
            legacy.close()
            del self.sessions[sid]
            await _Response(wire).json(200, b"")
        else:
            raise _Reject(405, headers=[(b"allow", b"GET, POST, DELETE")])

    async def _modern(self, wire: _Wire, headers: _Headers, body: bytes, version: str) -> None:
        msg = _decode(body)
        if isinstance(msg, rpc.Notification):
            raise _Reject(202)
        if not isinstance(msg, rpc.Request):
            raise _rpc_reject(400, None, rpc.INVALID_REQUEST, "Invalid request: not a request")
        req = msg
        if req.method == "initialize":
            message = (
                "initialize belongs to the handshake protocol: send it without MCP-Protocol-Version"
            )
            raise _rpc_reject(400, req.id, rpc.INVALID_REQUEST, message)
        mismatch = _header_mismatch(headers, req)
        if mismatch is not None:
            raise _rpc_reject(400, req.id, rpc.HEADER_MISMATCH, f"Header mismatch: {mismatch}")
        claimed: Any = version
        try:
            ctx = self.stateless.context(req)
            claimed = ctx.version
        except rpc.RPCError as exc:
            claimed = exc.data.get("requested") if isinstance(exc.data, dict) else version
            if claimed == version:
                body = rpc.encode_error_object(req.id, exc.to_object())
                raise _Reject(_MODERN_STATUS.get(exc.code, 200), body) from None
        # A client that disagrees with itself hears that, not that its version is unknown.
        if claimed != version:
            message = (
                f"Header mismatch: MCP-Protocol-Version is {version!r}, _meta says {claimed!r}"
            )
            raise _rpc_reject(400, req.id, rpc.HEADER_MISMATCH, message)

        async def handle(response: _Response) -> Reply:
            return await self.server.handle(self.stateless, req, response.event, ctx)

        await self._answer(wire, handle, trio.CancelScope(), _MODERN_STATUS)

    async def _legacy_post(self, wire: _Wire, headers: _Headers, body: bytes) -> None:
        msg = _decode(body)
        if isinstance(msg, rpc.Request) and msg.method == "initialize":
            await self._initialize(wire, msg)
            return
        _, legacy = self._session(headers)
        if isinstance(msg, rpc.Notification):
            if msg.method == "notifications/cancelled":
                _cancel(legacy, msg)
            raise _Reject(202)
        if not isinstance(msg, rpc.Request):
            raise _Reject(202)  # a response to a server request; this server sends none
        req = msg
        if req.id in legacy.requests:
            raise _rpc_reject(400, req.id, rpc.INVALID_REQUEST, f"Request id {req.id!r} is in use")
        scope = legacy.requests[req.id] = trio.CancelScope()

        async def handle(response: _Response) -> Reply:
            return await self.server.handle(legacy.session, req, response.event)

        try:
            await self._answer(wire, handle, scope, {})
        finally:
            legacy.requests.pop(req.id, None)

    async def _initialize(self, wire: _Wire, req: rpc.Request) -> None:
        session = self.server.new_session()
        reply = await self.server.handle(session, req, _no_notifications)
        extra: HeaderList = []
        if reply.error_code is None:
            if len(self.sessions) >= MAX_SESSIONS:
                oldest = next(iter(self.sessions))
                log.info("too many sessions; ending the oldest, %s", oldest)
                self.sessions.pop(oldest).close()
            sid = secrets.token_hex(16)
            self.sessions[sid] = _LegacySession(session)
            extra.append((b"mcp-session-id", sid.encode()))
        await _Response(wire).json(200, reply.message, extra)

    async def _legacy_stream(self, wire: _Wire, headers: _Headers) -> None:
        """GET: the session's stream for notifications nobody asked for (list changes)."""
        _, legacy = self._session(headers)
        if not _accepts(headers.get("accept"), "text/event-stream"):
            raise _Reject(406, b"GET needs Accept: text/event-stream")
        scope = trio.CancelScope()
        legacy.streams.add(scope)

        async def handle(response: _Response) -> Reply:
            await response.open_stream()
            await self.server.announce_tool_changes(response.event)

        try:
            await self._answer(wire, handle, scope, {})
        finally:
            legacy.streams.discard(scope)

    async def _answer(
        self,
        wire: _Wire,
        handle: Callable[[_Response], Awaitable[Reply]],
        scope: trio.CancelScope,
        status: Mapping[int, int],
    ) -> None:
        response = _Response(wire, scope)
        reply: Reply | None = None
        async with trio.open_nursery() as nursery:

            async def cancel_on_hangup() -> None:
                await wire.wait_gone()
                scope.cancel()

            nursery.start_soon(cancel_on_hangup)
            with scope:
                reply = await handle(response)
            nursery.cancel_scope.cancel()
        if wire.peer_gone:
            return
        code = reply.error_code if reply is not None else None
        await response.finish(reply, status.get(code, 200) if code is not None else 200)

    def _session(self, headers: _Headers) -> tuple[str, _LegacySession]:
        sid = headers.get("mcp-session-id")
        if sid is None:
            raise _rpc_reject(400, None, rpc.INVALID_REQUEST, "Bad Request: Missing session ID")
        legacy = self.sessions.get(sid)
        if legacy is None:
            raise _rpc_reject(404, None, rpc.INVALID_REQUEST, "Session not found")
        return sid, legacy


async def _no_notifications(message: bytes) -> None:
    raise AssertionError("initialize sends no notifications")


def _head(status: int, headers: HeaderList) -> h11.Response:
    return h11.Response(status_code=status, headers=headers, reason=HTTPStatus(status).phrase)


def _decode(body: bytes) -> rpc.Message:
    try:
        return rpc.decode_message(body)
    except rpc.DecodeFailure as exc:
        raise _Reject(400, exc.reply()) from None


def _cancel(legacy: _LegacySession, msg: rpc.Notification) -> None:
    try:
        target = rpc.decode_as(msg.params, mcp.CancelledParams).requestId
    except rpc.InvalidParams:
        return
    scope = legacy.requests.get(target) if isinstance(target, (int, str)) else None
    if scope is not None:
        scope.cancel()


def _check_post(headers: _Headers) -> None:
    content_type = (headers.get("content-type") or "").partition(";")[0].strip().lower()
    if content_type != "application/json":
        message = "Unsupported Media Type: Content-Type must be application/json"
        raise _rpc_reject(415, None, rpc.INVALID_REQUEST, message)
    accept = headers.get("accept")
    if not (_accepts(accept, "application/json") and _accepts(accept, "text/event-stream")):
        message = "Not Acceptable: Accept must list application/json and text/event-stream"
        raise _rpc_reject(406, None, rpc.INVALID_REQUEST, message)


def _accepts(accept: str | None, media_type: str) -> bool:
    if accept is None:
        return False
    wildcard = media_type.partition("/")[0] + "/*"
    offered = {part.partition(";")[0].strip().lower() for part in accept.split(",")}
    return bool(offered & {media_type, wildcard, "*/*"})


def _header_mismatch(headers: _Headers, req: rpc.Request) -> str | None:
    """Why the routing headers disagree with the body, or None when they agree."""
    for name in ("mcp-protocol-version", "mcp-method", "mcp-name"):
        if headers.count(name) > 1:
            return f"{name} appears more than once"
    method = headers.get("mcp-method")
    if method is None:
        return "Mcp-Method is missing"
    if method != req.method:
        return f"Mcp-Method is {method!r}, the body's method is {req.method!r}"
    source = mcp_headers.NAME_SOURCE.get(req.method)
    if source is None:
        return None
    try:
        want = getattr(rpc.decode_as(req.params, _Named), source)
    except rpc.InvalidParams:
        return None  # the handler reports the malformed params
    raw = headers.get("mcp-name")
    if raw is None:
        return "Mcp-Name is missing" if want is not None else None
    if not raw.isascii():
        return "Mcp-Name carries characters outside ASCII"
    try:
        name = mcp_headers.decode_value(raw)
    except mcp_headers.HeaderValueError as exc:
        return f"Mcp-Name: {exc}"
    if name != want:
        return f"Mcp-Name is {name!r}, the body's {source} is {want!r}"
    return None
