"""An HTTP+SSE (MCP 2024-11-05) server for the legacy SSE transport's tests.

It runs on ``http_servers.serving``' h11 server. ``GET /sse`` opens a session: the stream's
first event names the session's endpoint (relative by default; ``endpoint`` may make
it anything), and whatever the server sends goes down that stream. ``POST
/messages?session_id=…`` takes one message, answers 202 and hands the message to
``on_message`` in a task of its own, so a slow request holds up nothing (with
``accept_after`` the message is handled first and the 202 comes after, the way some
servers answer). ``forget`` loses every session, as a restarted server would, while
their streams stay open. A POST to ``/sse`` gets 405, like the SDKs' servers.
"""

from __future__ import annotations

import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import trio

from tests.support.http_servers.serving import HttpServer, Responder, SeenRequest, serve_http

Message = dict[str, Any]


def sse_event(data: str, *, event: str | None = None, eol: str = "\n") -> bytes:
    """One event; ``data`` with newlines in it goes out as several ``data:`` lines."""
    lines = [f"event: {event}"] if event is not None else []
    lines += [f"data: {line}" for line in data.split("\n")]
    return (eol.join(lines) + eol + eol).encode()


def encode(msg: Message, indent: int | None = None) -> str:
    separators = (",", ":") if indent is None else (",", ": ")
    return json.dumps(msg, indent=indent, separators=separators, ensure_ascii=False)


class Session:
    def __init__(self, sid: str) -> None:
        self.id = sid
        self.received: list[Message] = []
        self.disconnected = trio.Event()
        self._out, self._in = trio.open_memory_channel[bytes | None](64)
        self._grew = trio.Event()

    async def send(self, msg: Message, *, indent: int | None = None, eol: str = "\n") -> None:
        """A message on the stream (pretty-printed over several lines with ``indent``)."""
        await self.send_raw(sse_event(encode(msg, indent), eol=eol))

    async def send_raw(self, data: bytes | str) -> None:
        await self._out.send(data.encode() if isinstance(data, str) else data)

    async def drop(self) -> None:
        """Cut the stream's connection."""
        await self._out.send(None)

    async def end(self) -> None:
        """End the stream properly (the last chunk of a chunked body)."""
        await self._out.send(b"")

    def _got(self, msg: Message) -> None:
        self.received.append(msg)
        self._grew.set()
        self._grew = trio.Event()

    async def wait_for(self, match: Callable[[Message], bool]) -> Message:
        """The first message received that ``match`` accepts (the caller bounds the wait)."""
        while True:
            for msg in self.received:
                if match(msg):
                    return msg
            await self._grew.wait()

    async def wait_method(self, method: str) -> Message:
        return await self.wait_for(lambda m: m.get("method") == method)


OnMessage = Callable[[Session, Message], Awaitable[None]]


def relative_endpoint(sid: str, http: HttpServer) -> str:
    return f"/messages?session_id={sid}"


async def answer(session: Session, msg: Message) -> None:
    """A small MCP server: initialize, ping, one tool ("echo"), -32601 for the rest."""
    method, rid = msg.get("method"), msg.get("id")
    if method is None or rid is None:
        return  # a notification, or an answer to one of our requests
    params = msg.get("params") or {}
    if method == "initialize":
        value: Any = {
            "protocolVersion": "2024-11-05",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "old-sse", "version": "1"},
        }
    elif method == "ping":
        value = {}
    elif method == "tools/list":
        value = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call" and params.get("name") == "echo":
        text = params.get("arguments", {}).get("text", "")
        value = {"content": [{"type": "text", "text": text}]}
    else:
        await session.send(
            {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no " + method}}
        )
        return
    await session.send({"jsonrpc": "2.0", "id": rid, "result": value})


class LegacySSEServer:
    def __init__(
        self,
        on_message: OnMessage = answer,
        *,
        endpoint: Callable[[str, HttpServer], str] = relative_endpoint,
        accept_after: bool = False,
    ) -> None:
        self.on_message = on_message
        self.endpoint = endpoint
        self.accept_after = accept_after
        self.stream_path = "/sse"  # where the stream is opened
        self.sessions: dict[str, Session] = {}
        self.all_sessions: list[Session] = []
        self.errors: list[BaseException] = []
        self._opened = trio.Event()
        self._nursery: trio.Nursery | None = None
        self.http: HttpServer | None = None

    def url(self, path: str = "/sse") -> str:
        assert self.http is not None
        return self.http.url(path)

    @property
    def requests(self) -> list[SeenRequest]:
        assert self.http is not None
        return self.http.requests

    @property
    def session(self) -> Session:
        """The newest session."""
        return self.all_sessions[-1]

    async def wait_session(self, count: int = 1) -> Session:
        while len(self.all_sessions) < count:
            await self._opened.wait()
        return self.all_sessions[count - 1]

    def forget(self) -> None:
        self.sessions.clear()

    async def __call__(self, req: SeenRequest, respond: Responder) -> None:
        parts = urlsplit(req.target)
        if parts.path == self.stream_path and req.method == "GET":
            await self._stream(respond)
        elif parts.path == "/messages" and req.method == "POST":
            sid = parse_qs(parts.query).get("session_id", [""])[0]
            await self._message(self.sessions.get(sid), req, respond)
        elif parts.path == self.stream_path:
            await respond.reply(405, "Method Not Allowed", {"Allow": "GET"})
        else:
            await respond.reply(404, "Not Found")

    async def _stream(self, respond: Responder) -> None:
        assert self.http is not None
        session = Session(f"s{len(self.all_sessions) + 1}")
        self.sessions[session.id] = session
        self.all_sessions.append(session)
        self._opened.set()
        self._opened = trio.Event()
        await respond.sse_start(headers={"Cache-Control": "no-store"})
        await respond.send(sse_event(self.endpoint(session.id, self.http), event="endpoint"))
        cut = False
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                await respond.wait_disconnect()
                session.disconnected.set()
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            async for data in session._in:
                if data is None:
                    cut = True
                    break
                if not data:
                    await respond.end()
                    break
                try:
                    await respond.send(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    break  # the client hung up while a write waited for it to read
            nursery.cancel_scope.cancel()
        if cut:
            await respond.cut()

    async def _message(self, session: Session | None, req: SeenRequest, respond: Responder) -> None:
        if session is None:
            await respond.reply(404, "Could not find session", {"Content-Type": "text/plain"})
            return
        msg = req.message
        session._got(msg)
        if self.accept_after:
            await self._handle(session, msg)
            await respond.reply(202, "Accepted")
            return
        await respond.reply(202, "Accepted")
        assert self._nursery is not None
        self._nursery.start_soon(self._handle, session, msg)

    async def _handle(self, session: Session, msg: Message) -> None:
        try:
            await self.on_message(session, msg)
        except Exception as exc:
            self.errors.append(exc)


@contextlib.asynccontextmanager
async def serve_legacy_sse(
    on_message: OnMessage = answer,
    *,
    endpoint: Callable[[str, HttpServer], str] = relative_endpoint,
    accept_after: bool = False,
    ssl_context: ssl.SSLContext | None = None,
) -> AsyncIterator[LegacySSEServer]:
    server = LegacySSEServer(on_message, endpoint=endpoint, accept_after=accept_after)
    async with trio.open_nursery() as nursery:
        server._nursery = nursery
        async with serve_http(server, ssl_context=ssl_context) as http:
            server.http = http
            yield server
        nursery.cancel_scope.cancel()
    if server.errors:
        raise server.errors[0]
