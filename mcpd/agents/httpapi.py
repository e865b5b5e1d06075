"""HTTP on the agent socket, for people, monitors and HTTP-only MCP clients.

A connection whose first byte is an upper-case letter (an HTTP method; JSON-RPC lines
start with ``{``) is served by h11 instead of the line protocol:

- ``GET /status``: the status JSON, as ``mcpd status --json`` prints it
- ``GET /tools``: the aggregated tools; ``?format=anthropic|openai|openai-responses``
- ``GET /healthz``: 200 when every server is available, else 503 with the reasons
- ``GET /metrics``: Prometheus text
- ``GET /prompts``, ``GET /resources``: the aggregated prompts; resources and templates
- ``POST /mcp``: Streamable HTTP MCP in both eras, answered by the socket's own
  dispatch (a modern request stands alone; ``initialize`` opens a legacy session
  named by ``Mcp-Session-Id``, which DELETE ends)

so ``curl --unix-socket /run/mcpd/mcpd.sock http://mcpd/status`` works. Who may
connect is decided by the socket's mode and ``allow_uids``/``allow_groups``, as
for agents. ``?profile=NAME`` picks a profile (``/tools`` and ``/mcp``); a profile's
own socket serves that profile. The TCP endpoint (``tcp``) is this same code behind a
``guard`` that checks the bearer token and the Origin.
"""

from __future__ import annotations

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

from .askback import AgentRequests
from .backend import Backend, Control
from .connection import Connection, Dispatcher
from .formats import FORMATS, translate
from .http_exchange import Caller, Exchange
from .http_wire import HeaderList, Headers, Reject, Response, Wire, head, refuse
from .mcp_http import MODERN_STATUS, check_post, decode_body, modern_request, rpc_reject
from .peers import Peer
from .profiles import Profiles, ProfileServers

_REQUEST_TIMEOUT = 30.0

logger = logging.getLogger("mcpd.http")

MAX_SESSIONS: Final = 256
ENDPOINTS: Final = ("/status", "/tools", "/prompts", "/resources", "/healthz", "/metrics", "/mcp")
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


class _Legacy:
    def __init__(self, session: ServerSession, servers: ProfileServers) -> None:
        self.session = session
        self.servers = servers  # the profile chosen at initialize
        self.requests: dict[rpc.Id, trio.CancelScope] = {}
        self.asks = AgentRequests()

    def close(self) -> None:
        self.asks.close("the agent ended its session")
        for scope in self.requests.values():
            scope.cancel()


class HttpApi:
    def __init__(
        self,
        handler: Dispatcher,
        servers: Backend,
        control: Control,
        listeners: set[Connection],
        new_session: Callable[[], ServerSession],
        profiles: Profiles,
    ) -> None:
        self.handler = handler
        self.profiles = profiles
        self.servers = servers
        self.control = control
        # A listen over HTTP gets the list changes the socket's agents get.
        self.listeners = listeners
        self.new_session = new_session
        # Modern requests carry everything they need: one session answers them all.
        self.stateless = new_session()
        self.sessions: dict[str, _Legacy] = {}
        self.open = 0
        # A stateless client is known only by its user: one object per uid.
        self._peers: dict[int | None, object] = {}

    async def connection(
        self,
        stream: trio.SocketStream,
        peer: Peer | None,
        *,
        fixed: str | None = None,
        guard: Callable[[h11.Request], None] | None = None,
    ) -> None:
        caller = Caller(peer, fixed, guard)
        wire = Wire(stream)
        self.open += 1
        try:
            async with stream:
                if self.open > self.control.settings.max_connections:
                    await _send(wire, 503, "application/json", b'{"error":"too many connections"}')
                    return
                while await self._exchange(wire, caller):
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

    async def _exchange(self, wire: Wire, caller: Caller) -> bool:
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
            await self._route(wire, *request, caller)
        except Reject as rejection:
            await Response(wire).json(rejection.status, rejection.body, rejection.headers)
        return True

    async def _route(self, wire: Wire, request: h11.Request, body: bytes, caller: Caller) -> None:
        if caller.guard is not None:
            caller.guard(request)
        path, _, query_text = request.target.decode("latin-1").partition("?")
        query = parse_qs(query_text)
        if path == "/mcp":
            await self._mcp(wire, request, body, caller, query)
            return
        pages: dict[str, Callable[[dict[str, list[str]], Caller], tuple[int, str, bytes]]] = {
            "/status": self._status,
            "/tools": self._tools,
            "/prompts": self._prompts,
            "/resources": self._resources,
            "/healthz": self._healthz,
            "/metrics": self._metrics,
        }
        page = pages.get(path.rstrip("/") or "/")
        if page is None:
            raise Reject(404, _encode({"error": f"no page {path}", "pages": ENDPOINTS}))
        if request.method not in (b"GET", b"HEAD"):
            raise Reject(405, headers=[(b"allow", b"GET, HEAD")])
        status, content_type, content = page(query, caller)
        await _send(wire, status, content_type, content, head_only=request.method == b"HEAD")

    # -- pages --

    def _profile(self, query: dict[str, list[str]], caller: Caller) -> ProfileServers:
        """The profile ``?profile=`` names, the socket's own, or the default one."""
        asked = query.get("profile")
        name = asked[0] if asked else caller.fixed
        if name is None:
            return self.profiles.default
        try:
            return self.profiles.choose(name, caller.peer, caller.fixed)
        except rpc.RPCError as exc:
            raise rpc_reject(400 if "no profile" in exc.message else 403, None, exc.code,
                             exc.message) from None  # fmt: skip

    def _status(self, query: dict[str, list[str]], caller: Caller) -> tuple[int, str, bytes]:
        return 200, "application/json", _encode(self.control.status())

    def _tools(self, query: dict[str, list[str]], caller: Caller) -> tuple[int, str, bytes]:
        listing = self._profile(query, caller).listing()
        tools = msgspec.json.decode(b"[" + b",".join(listing) + b"]")
        fmt = (query.get("format") or ["mcp"])[0]
        if fmt == "mcp":
            return 200, "application/json", _encode({"tools": tools})
        if fmt not in FORMATS:
            known = ", ".join(["mcp", *FORMATS])
            raise Reject(400, _encode({"error": f"unknown format {fmt!r}; use one of {known}"}))
        return 200, "application/json", _encode(translate(tools, fmt))

    def _prompts(self, query: dict[str, list[str]], caller: Caller) -> tuple[int, str, bytes]:
        sees = self._profile(query, caller).view.admits_prompt
        return 200, "application/json", _encode({"prompts": self.servers.prompt_listing(sees)})

    def _resources(self, query: dict[str, list[str]], caller: Caller) -> tuple[int, str, bytes]:
        s, sees = self.servers, self._profile(query, caller).view.admits_resource
        body = {
            "resources": s.resource_listing(sees),
            "resourceTemplates": s.template_listing(sees),
        }
        return 200, "application/json", _encode(body)

    def _healthz(self, query: dict[str, list[str]], caller: Caller) -> tuple[int, str, bytes]:
        states = self.servers.states()
        down = [s for s in states if not s["available"]]
        if not self.control.ready:
            body = {"status": "starting", "servers": down}
        elif down:
            body = {"status": "unavailable", "servers": down}
        else:
            return 200, "application/json", _encode({"status": "ok", "servers": len(states)})
        return 503, "application/json", _encode(body)

    def _metrics(self, query: dict[str, list[str]], caller: Caller) -> tuple[int, str, bytes]:
        return 200, METRICS_TYPE, self.control.metrics().encode()

    # -- POST /mcp --

    def _end(self, legacy: _Legacy) -> None:
        legacy.close()
        gone = getattr(self.handler, "agent_gone", None)  # its subscriptions end with it
        if gone is not None:
            gone(legacy)

    def _exchange_for(
        self,
        session: ServerSession,
        caller: Caller,
        servers: ProfileServers,
        legacy: _Legacy | None = None,
    ) -> Exchange:
        exchange = Exchange(self.handler, session, caller, servers)
        if legacy is not None:
            exchange.owner, exchange.asks = legacy, legacy.asks
        else:
            uid = caller.peer.uid if caller.peer is not None else None
            exchange.owner = self._peers.setdefault(uid, object())
        return exchange

    async def _mcp(
        self,
        wire: Wire,
        request: h11.Request,
        body: bytes,
        caller: Caller,
        query: dict[str, list[str]],
    ) -> None:
        headers = Headers(request.headers)
        if request.method == b"DELETE":
            sid = headers.get("mcp-session-id")
            legacy = self.sessions.pop(sid, None) if sid is not None else None
            if legacy is None:
                raise rpc_reject(404, None, rpc.INVALID_REQUEST, "Session not found")
            self._end(legacy)
            await Response(wire).json(200, b"")
            return
        if request.method != b"POST":
            # No stream for unsolicited messages: list changes come on a listen instead.
            raise Reject(405, headers=[(b"allow", b"POST, DELETE")])
        check_post(headers)
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in self.stateless.legacy_versions:
            await self._modern(wire, headers, body, version, caller, query)
        else:
            await self._legacy(wire, headers, body, caller, query)

    async def _modern(
        self,
        wire: Wire,
        headers: Headers,
        body: bytes,
        version: str,
        caller: Caller,
        query: dict[str, list[str]],
    ) -> None:
        req, _ = modern_request(headers, body, version, self.stateless)
        exchange = self._exchange_for(self.stateless, caller, self._profile(query, caller))
        await self._answer(wire, exchange, req, trio.CancelScope(), modern=True)

    async def _legacy(
        self,
        wire: Wire,
        headers: Headers,
        body: bytes,
        caller: Caller,
        query: dict[str, list[str]],
    ) -> None:
        msg = decode_body(body)
        if isinstance(msg, rpc.Request) and msg.method == "initialize":
            session = self.new_session()
            servers = self._profile(query, caller)
            reply = self.handler.answer_now(self._exchange_for(session, caller, servers), msg)
            extra: HeaderList = []
            if session.legacy_version is not None:
                if len(self.sessions) >= MAX_SESSIONS:
                    self._end(self.sessions.pop(next(iter(self.sessions))))
                sid = secrets.token_hex(16)
                self.sessions[sid] = _Legacy(session, servers)
                extra.append((b"mcp-session-id", sid.encode()))
            await Response(wire).json(200, reply, extra)
            return
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            raise rpc_reject(400, None, rpc.INVALID_REQUEST, "Bad Request: Missing session ID")
        legacy = self.sessions.get(session_id)
        # A profile's socket serves only its own sessions: one opened elsewhere (for
        # another profile) does not exist there.
        if legacy is None or caller.fixed not in (None, legacy.servers.name):
            raise rpc_reject(404, None, rpc.INVALID_REQUEST, "Session not found")
        if isinstance(msg, rpc.Notification):
            if msg.method == "notifications/cancelled":
                _cancel(legacy, msg)
            raise Reject(202)
        if not isinstance(msg, rpc.Request):
            legacy.asks.route(msg)  # the agent's answer to what a server asked it
            raise Reject(202)
        if msg.id in legacy.requests:
            raise rpc_reject(400, msg.id, rpc.INVALID_REQUEST, f"Request id {msg.id!r} is in use")
        scope = legacy.requests[msg.id] = trio.CancelScope()
        try:
            exchange = self._exchange_for(legacy.session, caller, legacy.servers, legacy)
            await self._answer(wire, exchange, msg, scope, modern=False)
        finally:
            legacy.requests.pop(msg.id, None)

    async def _answer(
        self,
        wire: Wire,
        exchange: Exchange,
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
