"""Raw clients for the demo server tests: JSON lines on a child's stdio, HTTP via h11.

Deliberately independent of mcpd's own transports, so the servers are checked
against the wire format itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, NamedTuple

import h11
import trio

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
CUSTOM_SERVER = str(Path(__file__).parents[1] / "servers" / "demo_custom.py")
NOTES = [sys.executable, "-m", "mcpd.demo.notes"]
TICKETS = [sys.executable, "-m", "mcpd.demo.tickets"]
CUSTOM = [sys.executable, CUSTOM_SERVER]


def meta(version: str = MODERN, **extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
        **extra,
    }


def request(id: int | str, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        msg["params"] = dict(params)
    return msg


def call(id: int | str, name: str, arguments: Mapping[str, Any], **m: Any) -> dict[str, Any]:
    return request(
        id, "tools/call", {"name": name, "arguments": dict(arguments), "_meta": meta(**m)}
    )


def initialize(id: int | str = 1) -> dict[str, Any]:
    params = {
        "protocolVersion": LEGACY,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    }
    return request(id, "initialize", params)


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def cancel(request_id: int | str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id},
    }


def text_of(response: Mapping[str, Any]) -> str:
    return str(response["result"]["content"][0]["text"])


# --- stdio ----------------------------------------------------------------------------


class StdioPeer:
    """A client on a child's stdin/stdout. Every stdout line must be one JSON message."""

    def __init__(self, proc: trio.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self._stdin = proc.stdin
        self._stdout = proc.stdout
        self._buf = b""
        self.seen: list[dict[str, Any]] = []

    async def send(self, msg: Mapping[str, Any]) -> None:
        await self._stdin.send_all(json.dumps(msg).encode() + b"\n")

    async def recv(self) -> dict[str, Any] | None:
        """The next message, or None at end of output."""
        while b"\n" not in self._buf:
            chunk = await self._stdout.receive_some()
            if not chunk:
                assert self._buf == b"", f"output ended inside a line: {self._buf[:200]!r}"
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        msg: dict[str, Any] = json.loads(line)
        assert msg.get("jsonrpc") == "2.0", msg
        self.seen.append(msg)
        return msg

    async def response(self, id: int | str) -> dict[str, Any]:
        """Read until the response to ``id``; everything read is kept in ``seen``."""
        while True:
            msg = await self.recv()
            assert msg is not None, f"output ended before the response to {id!r}"
            if msg.get("id") == id and "method" not in msg:
                return msg

    async def notification(self, method: str) -> dict[str, Any]:
        """The first ``method`` notification, whether already read or still to come."""
        for msg in self.seen:
            if msg.get("method") == method:
                return msg
        while True:
            msg = await self.recv()
            assert msg is not None, f"output ended before a {method}"
            if msg.get("method") == method:
                return msg

    async def ask(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        await self.send(msg)
        return await self.response(msg["id"])

    async def close_input(self) -> None:
        await self._stdin.aclose()

    async def rest(self) -> list[dict[str, Any]]:
        """Everything until the child closes its stdout."""
        out = []
        while (msg := await self.recv()) is not None:
            out.append(msg)
        return out


@asynccontextmanager
async def spawn_stdio(
    argv: list[str], env: Mapping[str, str] | None = None
) -> AsyncIterator[StdioPeer]:
    proc = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, **env} if env is not None else None,
    )
    try:
        yield StdioPeer(proc)
    finally:
        with trio.move_on_after(10, shield=True):
            if proc.stdin is not None:
                await proc.stdin.aclose()
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        if proc.stdout is not None:
            await proc.stdout.aclose()


async def pages(peer: StdioPeer, first_id: int, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every tools/list page, following nextCursor."""
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        p = dict(params)
        if cursor is not None:
            p["cursor"] = cursor
        reply = await peer.ask(request(first_id + len(out), "tools/list", p))
        out.append(reply["result"])
        cursor = reply["result"].get("nextCursor")
        if cursor is None:
            return out


# --- HTTP -----------------------------------------------------------------------------


class HttpReply(NamedTuple):
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    def json(self) -> Any:
        assert self.content_type == "application/json", self
        return json.loads(self.body)

    def events(self) -> list[dict[str, Any]]:
        assert self.content_type == "text/event-stream", self
        return parse_sse(self.body)


def parse_sse(body: bytes) -> list[dict[str, Any]]:
    """Events as this server writes them: ``event: message`` and one ``data:`` line."""
    out = []
    for block in body.split(b"\n\n"):
        if not block.strip():
            continue
        event, data = block.split(b"\n")
        assert event == b"event: message", block
        assert data.startswith(b"data: "), block
        out.append(json.loads(data[len(b"data: ") :]))
    return out


POST_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def modern_headers(method: str, name: str | None = None, version: str = MODERN) -> dict[str, str]:
    h = {**POST_HEADERS, "mcp-protocol-version": version, "mcp-method": method}
    if name is not None:
        h["mcp-name"] = name
    return h


class HttpConn:
    """One keep-alive client connection."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.conn = h11.Connection(h11.CLIENT)

    @classmethod
    @asynccontextmanager
    async def open(cls, port: int) -> AsyncIterator[HttpConn]:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            yield cls(stream)

    async def _send(self, *events: Any) -> None:
        for event in events:
            data = self.conn.send(event)
            if data:
                await self.stream.send_all(data)

    async def _next(self) -> Any:
        while (event := self.conn.next_event()) is h11.NEED_DATA:
            self.conn.receive_data(await self.stream.receive_some())
        return event

    async def start(
        self, method: str, headers: Mapping[str, str], body: Any = None
    ) -> tuple[int, dict[str, str]]:
        """Send a request and read the response head."""
        if self.conn.our_state is h11.DONE:
            self.conn.start_next_cycle()
        data = (
            b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        )
        fields = [("host", "127.0.0.1"), *headers.items(), ("content-length", str(len(data)))]
        await self._send(
            h11.Request(method=method, target="/mcp", headers=fields),
            h11.Data(data=data),
            h11.EndOfMessage(),
        )
        head = await self._next()
        assert isinstance(head, h11.Response), head
        return head.status_code, {k.decode(): v.decode() for k, v in head.headers}

    async def chunk(self) -> bytes | None:
        """The next piece of the body, or None at its end."""
        event = await self._next()
        if isinstance(event, h11.EndOfMessage):
            return None
        assert isinstance(event, h11.Data), event
        return bytes(event.data)

    async def next_event(self) -> dict[str, Any]:
        """Read body pieces until one whole SSE event is in."""
        buf = b""
        while not buf.endswith(b"\n\n"):
            piece = await self.chunk()
            assert piece is not None, f"stream ended inside an event: {buf!r}"
            buf += piece
        (event,) = parse_sse(buf)
        return event

    async def request(self, method: str, headers: Mapping[str, str], body: Any = None) -> HttpReply:
        status, head = await self.start(method, headers, body)
        data = b""
        while (piece := await self.chunk()) is not None:
            data += piece
        return HttpReply(status, head, data)


async def http(port: int, method: str, headers: Mapping[str, str], body: Any = None) -> HttpReply:
    async with HttpConn.open(port) as conn:
        return await conn.request(method, headers, body)


class HttpChild(NamedTuple):
    port: int
    proc: trio.Process


@asynccontextmanager
async def spawn_http_child(argv: list[str], tmp_path: Path) -> AsyncIterator[HttpChild]:
    """Run a demo server with ``--http 127.0.0.1:0``; SIGTERM must end it cleanly."""
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    # Opened read-write so this never blocks and never sees end of file early.
    ready = trio.lowlevel.FdStream(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))
    proc = await trio.lowlevel.open_process(
        [*argv, "--http", "127.0.0.1:0", "--ready-file", str(fifo)]
    )
    try:
        text = b""
        async with ready:
            while not text.endswith(b"\n"):
                text += await ready.receive_some()
        yield HttpChild(int(text), proc)
    finally:
        with trio.move_on_after(10, shield=True):
            proc.terminate()
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, f"HTTP server exited with {proc.returncode} on SIGTERM"


@asynccontextmanager
async def spawn_http(argv: list[str], tmp_path: Path) -> AsyncIterator[int]:
    """``spawn_http_child``, for tests that only need the port."""
    async with spawn_http_child(argv, tmp_path) as child:
        yield child.port
