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
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import h11
import trio

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

from ..agents.http.mcp_http import (
    MODERN_STATUS,
    accepts,
    check_post,
    decode_body,
    modern_request,
    rpc_reject,
)
from ..agents.http.wire import HeaderList, Headers, Reject, Wire, WireResponse, refuse_malformed

if TYPE_CHECKING:
    from protocol.mcp.serving import AgentSession

    from .runtime import DemoServer, Reply

log = logging.getLogger("mcpd.demo.http")

ENDPOINT: Final = b"/mcp"
MAX_SESSIONS: Final = 256
_LOCAL_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})


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


class _LegacySession:
    def __init__(self, session: AgentSession) -> None:
        self.session = session
        self.requests: dict[rpc.Id, trio.CancelScope] = {}
        self.streams: set[trio.CancelScope] = set()

    def close(self) -> None:
        for scope in [*self.requests.values(), *self.streams]:
            scope.cancel()


class _HttpServer:
    def __init__(self, server: DemoServer, host: str) -> None:
        self.server = server
        # Modern requests carry all they need, so one session object serves them all.
        self.stateless = server.new_session()
        self.handshake_versions = frozenset(self.stateless.legacy_versions)
        self.sessions: dict[str, _LegacySession] = {}
        self.hosts = _LOCAL_HOSTS | {host}

    async def connection(self, stream: trio.SocketStream) -> None:
        wire = Wire(stream)
        async with stream:
            try:
                while await self._exchange(wire):
                    done = wire.conn.our_state is h11.DONE and wire.conn.their_state is h11.DONE
                    if wire.broken or not done:
                        break
                    wire.conn.start_next_cycle()
            except h11.RemoteProtocolError as exc:
                log.info("bad HTTP from a client: %s", exc)
                await refuse_malformed(wire, exc)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            except Exception:
                # One broken exchange must not take the server (and every client) down.
                log.exception("HTTP connection failed")

    async def _exchange(self, wire: Wire) -> bool:
        try:
            request = await wire.read_request()
            if request is None:
                return False
            await self._route(wire, *request)
        except Reject as rejection:
            await WireResponse(wire).json(rejection.status, rejection.body, rejection.headers)
        return True

    async def _route(self, wire: Wire, request: h11.Request, body: bytes) -> None:
        headers = Headers(request.headers)
        if request.target.partition(b"?")[0] != ENDPOINT:
            raise Reject(404)
        origin = headers.get("origin")
        if origin is not None and urlsplit(origin).hostname not in self.hosts:
            raise rpc_reject(403, None, rpc.INVALID_REQUEST, "Forbidden: origin not allowed")
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in self.handshake_versions:
            if request.method != b"POST":
                raise Reject(405, headers=[(b"allow", b"POST")])
            check_post(headers)
            await self._modern(wire, headers, body, version)
        elif request.method == b"POST":
            check_post(headers)
            await self._legacy_post(wire, headers, body)
        elif request.method == b"GET":
            await self._legacy_stream(wire, headers)
        elif request.method == b"DELETE":
            sid, legacy = self._session(headers)
            legacy.close()
            del self.sessions[sid]
            await WireResponse(wire).json(200, b"")
        else:
            raise Reject(405, headers=[(b"allow", b"GET, POST, DELETE")])

    async def _modern(self, wire: Wire, headers: Headers, body: bytes, version: str) -> None:
        req, ctx = modern_request(headers, body, version, self.stateless)

        async def handle(response: WireResponse) -> Reply:
            return await self.server.handle(self.stateless, req, response.event, ctx)

        await self._answer(wire, handle, trio.CancelScope(), MODERN_STATUS)

    async def _legacy_post(self, wire: Wire, headers: Headers, body: bytes) -> None:
        msg = decode_body(body)
        if isinstance(msg, rpc.Request) and msg.method == "initialize":
            await self._initialize(wire, msg)
            return
        _, legacy = self._session(headers)
        if isinstance(msg, rpc.Notification):
            if msg.method == "notifications/cancelled":
                _cancel(legacy, msg)
            raise Reject(202)
        if not isinstance(msg, rpc.Request):
            raise Reject(202)  # a response to a server request; this server sends none
        req = msg
        if req.id in legacy.requests:
            raise rpc_reject(400, req.id, rpc.INVALID_REQUEST, f"Request id {req.id!r} is in use")
        scope = legacy.requests[req.id] = trio.CancelScope()

        async def handle(response: WireResponse) -> Reply:
            return await self.server.handle(legacy.session, req, response.event)

        try:
            await self._answer(wire, handle, scope, {})
        finally:
            legacy.requests.pop(req.id, None)

    async def _initialize(self, wire: Wire, req: rpc.Request) -> None:
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
        await WireResponse(wire).json(200, reply.message, extra)

    async def _legacy_stream(self, wire: Wire, headers: Headers) -> None:
        """GET: the session's stream for notifications nobody asked for (list changes)."""
        _, legacy = self._session(headers)
        if not accepts(headers.get("accept"), "text/event-stream"):
            raise Reject(406, b"GET needs Accept: text/event-stream")
        scope = trio.CancelScope()
        legacy.streams.add(scope)

        async def handle(response: WireResponse) -> Reply:
            await response.open_stream()
            await self.server.announce_tool_changes(response.event)

        try:
            await self._answer(wire, handle, scope, {})
        finally:
            legacy.streams.discard(scope)

    async def _answer(
        self,
        wire: Wire,
        handle: Callable[[WireResponse], Awaitable[Reply]],
        scope: trio.CancelScope,
        status: Mapping[int, int],
    ) -> None:
        response = WireResponse(wire, scope)
        reply: Reply | None = None
        async with trio.open_nursery() as nursery:

            async def cancel_on_hangup() -> None:
                await wire.wait_gone()
                scope.cancel()

            nursery.start_soon(cancel_on_hangup)
            with scope:
                reply = await handle(response)
            nursery.cancel_scope.cancel()
        if wire.broken:
            return
        code = reply.error_code if reply is not None else None
        message = reply.message if reply is not None else None
        await response.finish(message, status.get(code, 200) if code is not None else 200)

    def _session(self, headers: Headers) -> tuple[str, _LegacySession]:
        sid = headers.get("mcp-session-id")
        if sid is None:
            raise rpc_reject(400, None, rpc.INVALID_REQUEST, "Bad Request: Missing session ID")
        legacy = self.sessions.get(sid)
        if legacy is None:
            raise rpc_reject(404, None, rpc.INVALID_REQUEST, "Session not found")
        return sid, legacy


async def _no_notifications(message: bytes) -> None:
    raise AssertionError("initialize sends no notifications")


def _cancel(legacy: _LegacySession, msg: rpc.Notification) -> None:
    try:
        target = rpc.decode_as(msg.params, mcp.CancelledParams).requestId
    except rpc.InvalidParams:
        return
    scope = legacy.requests.get(target) if isinstance(target, (int, str)) else None
    if scope is not None:
        scope.cancel()
