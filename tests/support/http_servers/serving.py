"""In-process HTTP/1.1 test servers on h11 and trio, for the HTTP transport's tests.

A server runs one handler per request. The handler sees the request as received
(method, target, headers, body, which TCP connection it came on) and answers
through a ``Responder``: a JSON reply, an SSE stream written piece by piece, a cut
connection, raw bytes, or waiting until the client hangs up. Every request is
recorded, so tests assert on what the server saw, not on what the client meant.
"""

from __future__ import annotations

import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

import h11
import msgspec
import trio

MODERN_VERSION = "2026-07-28"


class SeenRequest(msgspec.Struct):
    method: str
    target: str
    headers: list[tuple[str, str]]  # names lower-cased, in order
    body: bytes
    connection: int  # index of the TCP connection, from 0

    def header(self, name: str) -> str | None:
        name = name.lower()
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def header_names(self) -> list[str]:
        return [key for key, _ in self.headers]

    @property
    def message(self) -> Any:
        return json.loads(self.body) if self.body else None

    @property
    def rpc_method(self) -> str | None:
        msg = self.message
        return msg.get("method") if isinstance(msg, dict) else None

    @property
    def rpc_id(self) -> Any:
        msg = self.message
        return msg.get("id") if isinstance(msg, dict) else None


Headers = Mapping[str, str] | Iterable[tuple[str, str]]


def _items(headers: Headers) -> list[tuple[str, str]]:
    return list(headers.items()) if isinstance(headers, Mapping) else list(headers)


class _Cut(Exception):
    """Raised inside a handler to drop the connection on the spot."""


class Responder:
    def __init__(self, conn: h11.Connection, stream: trio.abc.Stream) -> None:
        self._conn = conn
        self._stream = stream

    async def _write(self, event: h11.Event) -> None:
        data = self._conn.send(event)
        if data:
            await self._stream.send_all(data)

    async def start(self, status: int, headers: Headers = ()) -> None:
        items = _items(headers)
        await self._write(h11.Response(status_code=status, headers=items))

    async def send(self, data: bytes | str) -> None:
        await self._write(h11.Data(data=data.encode() if isinstance(data, str) else data))

    async def end(self) -> None:
        await self._write(h11.EndOfMessage())

    async def reply(
        self,
        status: int,
        body: bytes | str = b"",
        headers: Headers = (),
    ) -> None:
        raw = body.encode() if isinstance(body, str) else body
        items = _items(headers)
        await self.start(status, [*items, ("Content-Length", str(len(raw)))])
        if raw:
            await self.send(raw)
        await self.end()

    async def json(
        self,
        obj: Any,
        status: int = 200,
        headers: Headers = (),
    ) -> None:
        items = _items(headers)
        await self.reply(status, json.dumps(obj), [("Content-Type", "application/json"), *items])

    async def sse_start(self, status: int = 200, headers: Headers = ()) -> None:
        items = _items(headers)
        await self.start(status, [("Content-Type", "text/event-stream"), *items])

    async def sse(
        self,
        *events: bytes | str,
        status: int = 200,
        headers: Headers = (),
    ) -> None:
        """A whole event stream: each argument is written as its own chunk."""
        await self.sse_start(status, headers)
        for event in events:
            await self.send(event)
        await self.end()

    async def cut(self) -> None:
        """Drop the connection now, mid-message if one is under way."""
        raise _Cut

    async def raw(self, data: bytes) -> None:
        """Write bytes no HTTP library would, then hang up."""
        await self._stream.send_all(data)
        raise _Cut

    async def reply_and_more(self, status: int, body: bytes, more: bytes) -> None:
        """A whole reply and, in the same write, bytes that belong to no exchange (a
        second response nobody asked for yet); the connection is kept."""
        length = [("Content-Length", str(len(body)))]
        parts = [
            self._conn.send(h11.Response(status_code=status, headers=length)),
            self._conn.send(h11.Data(data=body)),
            self._conn.send(h11.EndOfMessage()),
        ]
        await self._stream.send_all(b"".join(p or b"" for p in parts) + more)

    async def flood(self, data: bytes) -> None:
        """Write ``data`` again and again until the client hangs up, then hang up too."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while True:
                await self._stream.send_all(data)
        await trio.aclose_forcefully(self._stream)
        raise _Cut

    async def wait_disconnect(self) -> None:
        """Block until the client closes the connection (how 2026-07-28 cancels)."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while await self._stream.receive_some(4096):
                pass


Handler = Callable[[SeenRequest, Responder], Awaitable[None]]


def event(obj: Any, *, kind: str | None = "message", id: str | None = None) -> str:
    """One SSE event carrying ``obj`` as JSON."""
    lines = []
    if kind is not None:
        lines.append(f"event: {kind}")
    if id is not None:
        lines.append(f"id: {id}")
    lines.append(f"data: {json.dumps(obj)}")
    return "\n".join(lines) + "\n\n"


def result(id: Any, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": value}


def error(id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}


def notification(method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


class HttpServer:
    def __init__(self, handler: Handler, scheme: str, host: str, port: int) -> None:
        self.handler = handler
        self.scheme = scheme
        self.host = host
        self.port = port
        self.requests: list[SeenRequest] = []
        self.connections = 0
        # A failing handler must fail the test even if the client finished first.
        self.errors: list[BaseException] = []

    def url(self, path: str = "/mcp") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{path}"

    def methods(self) -> list[str | None]:
        return [r.rpc_method if r.method == "POST" else r.method for r in self.requests]

    async def serve_connection(self, stream: trio.abc.Stream) -> None:
        index = self.connections
        self.connections += 1
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                seen = await self._read_request(conn, stream, index)
                if seen is None:
                    break
                self.requests.append(seen)
                await self.handler(seen, Responder(conn, stream))
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    break
                conn.start_next_cycle()
        except (_Cut, trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            pass
        except Exception as exc:
            self.errors.append(exc)
        finally:
            await trio.aclose_forcefully(stream)

    async def _read_request(
        self, conn: h11.Connection, stream: trio.abc.Stream, index: int
    ) -> SeenRequest | None:
        request: h11.Request | None = None
        body = bytearray()
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
            elif isinstance(ev, h11.Request):
                request = ev
            elif isinstance(ev, h11.Data):
                body += ev.data
            elif isinstance(ev, h11.EndOfMessage):
                assert request is not None
                return SeenRequest(
                    request.method.decode(),
                    request.target.decode(),
                    [(k.decode(), v.decode("latin-1")) for k, v in request.headers],
                    bytes(body),
                    index,
                )
            else:
                return None


@contextlib.asynccontextmanager
async def serve_http(
    handler: Handler,
    *,
    host: str = "127.0.0.1",
    ssl_context: ssl.SSLContext | None = None,
    port: int = 0,
) -> AsyncIterator[HttpServer]:
    """``port``: 0 for a free one; a server that comes back takes the one it had."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    port = listeners[0].socket.getsockname()[1]
    served: list[trio.abc.Listener[Any]] = list(listeners)
    if ssl_context is not None:
        served = [trio.SSLListener(ln, ssl_context, https_compatible=True) for ln in listeners]
    server = HttpServer(handler, "https" if ssl_context else "http", host, port)

    async def on_connection(stream: trio.abc.Stream) -> None:
        if isinstance(stream, trio.SSLStream):
            try:
                await stream.do_handshake()
            except trio.BrokenResourceError:
                await trio.aclose_forcefully(stream)
                return
        await server.serve_connection(stream)

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, on_connection, served)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
    if server.errors:
        raise server.errors[0]


def priming(id: str, retry: int | None = None) -> str:
    """An event with an id and no message: where a client resumes the stream from."""
    return f"id: {id}\n" + (f"retry: {retry}\n" if retry is not None else "") + "data: \n\n"


def server_request(id: Any, method: str, params: Any = None) -> dict[str, Any]:
    msg = notification(method, params)
    msg["id"] = id
    return msg


class LegacySession:
    """A legacy (2025-11-25) server's session plumbing around a handler of one's own.

    ``initialize`` gets a JSON result (offering ``capabilities``, tools alone unless
    given) and a new ``Mcp-Session-Id``; notifications and
    answers to the server's requests get 202 (the answers are kept, and ``answered``
    is set for each); DELETE ends the session; a request naming an unknown session
    gets 404. Everything else (GETs, and requests after the handshake) goes to
    ``handler``.

    It forgets the session a request (not a notification) names while ``forgets`` is
    above 0 (one fewer each time), as a server that restarted does. ``strict`` makes it
    refuse what a sessionful server refuses: a message with no session (400 "No valid
    session ID provided"), and a request in a session whose
    ``notifications/initialized`` has not come (400).

    With ``upgrades`` set, a session it forgets is its last: from then on it speaks
    2026-07-28 alone, as a server restarted on a newer version does. ``initialize``
    gets -32022 naming that version, ``server/discover`` its discover result, a message
    in a session 404, and the rest goes to ``handler`` (``discovers`` counts them).
    """

    def __init__(
        self,
        handler: Handler,
        *,
        tools: list[dict[str, Any]] | None = None,
        capabilities: dict[str, Any] | None = None,
        strict: bool = False,
    ) -> None:
        self.handler = handler
        self.strict = strict
        self.forgets = 0
        self.upgrades = False
        self.modern = False  # it has upgraded
        self.discovers = 0
        self.forgotten: set[str] = set()
        self.initialized: set[str] = set()
        # What it refused for a session missing, unknown or not yet initialized.
        self.refused: list[tuple[int, str | None]] = []
        tools_only = {"tools": {"listChanged": True}}
        self.capabilities = tools_only if capabilities is None else capabilities
        self.sessions: list[str] = []
        self.ended: list[str] = []
        self.answers: list[dict[str, Any]] = []
        self.answered = trio.Event()
        self.tools = tools

    @property
    def session(self) -> str | None:
        return self.sessions[-1] if self.sessions else None

    async def __call__(self, req: SeenRequest, respond: Responder) -> None:
        sid = req.header("mcp-session-id")
        if self.modern:
            await self._as_modern(req, respond)
        elif req.method == "POST" and req.rpc_method == "initialize":
            self.sessions.append(f"session-{len(self.sessions) + 1}")
            value = {
                "protocolVersion": "2025-11-25",
                "capabilities": self.capabilities,
                "serverInfo": {"name": "legacy", "version": "1"},
            }
            await respond.json(result(req.rpc_id, value), headers={"Mcp-Session-Id": self.session})
        elif sid is not None and self._unknown(sid, req):
            self.refused.append((404, req.rpc_method))
            await respond.json(error(None, -32001, "Session not found"), 404)
        elif self.strict and sid is None and req.method != "DELETE":
            self.refused.append((400, req.rpc_method))
            missing = "Bad Request: No valid session ID provided"
            await respond.json(error(None, -32000, missing), 400)
        elif req.rpc_method == "notifications/initialized" and sid is not None:
            self.initialized.add(sid)
            await respond.reply(202)
        elif (
            self.strict
            and req.rpc_method is not None
            and req.rpc_id is not None
            and (sid not in self.initialized)
        ):
            self.refused.append((400, req.rpc_method))
            await respond.json(error(req.rpc_id, -32600, "Bad Request: not initialized"), 400)
        elif req.method == "DELETE":
            self.ended.append(sid or "")
            await respond.reply(200)
        elif req.method == "POST" and req.rpc_method is None:
            self.answers.append(req.message)
            self.answered.set()
            self.answered = trio.Event()
            await respond.reply(202)
        elif req.method == "POST" and req.rpc_id is None:
            await respond.reply(202)
        elif req.method == "POST" and req.rpc_method == "tools/list" and self.tools is not None:
            await respond.json(result(req.rpc_id, {"tools": list(self.tools)}))
        else:
            await self.handler(req, respond)

    async def _as_modern(self, req: SeenRequest, respond: Responder) -> None:
        if req.header("mcp-session-id") is not None:
            # A session of before the upgrade: one it no longer knows.
            self.refused.append((404, req.rpc_method))
            await respond.json(error(None, -32001, "Session not found"), 404)
        elif req.method == "POST" and req.rpc_method == "initialize":
            supported = {"supported": [MODERN_VERSION]}
            refused = error(req.rpc_id, -32022, "Unsupported protocol version")
            refused["error"]["data"] = supported
            await respond.json(refused)
        elif req.method == "POST" and req.rpc_method == "server/discover":
            self.discovers += 1
            found = {"supportedVersions": [MODERN_VERSION], "capabilities": self.capabilities}
            await respond.json(result(req.rpc_id, {"resultType": "complete", **found}))
        else:
            await self.handler(req, respond)

    def _unknown(self, sid: str, req: SeenRequest) -> bool:
        if sid == self.session and self.forgets and req.rpc_id is not None:
            self.forgets -= 1
            self.forgotten.add(sid)
            self.modern = self.upgrades
        return sid != self.session or sid in self.forgotten
