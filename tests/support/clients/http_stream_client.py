"""A legacy Streamable HTTP session on the daemon's endpoint, with its event stream, as an
agent holds it."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import h11
import trio

from mcpd.daemon import Daemon

LEGACY = "2025-11-25"


POST = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


class Client:
    """One HTTP/1.1 connection to the endpoint, read as it arrives."""

    def __init__(self, stream: trio.SocketStream, token: str | None) -> None:
        self.stream = stream
        self.token = token
        self.conn = h11.Connection(h11.CLIENT)
        self._sse = b""

    @classmethod
    @asynccontextmanager
    async def open(
        cls, daemon: Daemon, *, rcvbuf: int | None = None, unix: str | None = None
    ) -> AsyncIterator[Client]:
        """A connection to the TCP endpoint, or to the Unix socket ``unix`` (which takes
        no token: the daemon need not have an endpoint)."""
        token: str | None = None
        if unix is not None:
            sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            await sock.connect(unix)
        else:
            assert daemon.agent_server.endpoint is not None
            token = daemon.http_token()
            sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if rcvbuf is not None:  # set before connecting, so the window stays small
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            await sock.connect(("127.0.0.1", daemon.agent_server.endpoint.port))
        async with trio.SocketStream(sock) as stream:
            yield cls(stream, token)

    async def _next(self) -> Any:
        while (event := self.conn.next_event()) is h11.NEED_DATA:
            self.conn.receive_data(await self.stream.receive_some(1 << 16))
        return event

    async def start(
        self, method: str, headers: dict[str, str], body: Any = None, target: str = "/mcp"
    ) -> tuple[int, dict[str, str]]:
        await self.stream.send_all(self.encode(method, headers, body, target))
        return await self.response_head()

    def encode(
        self, method: str, headers: dict[str, str], body: Any = None, target: str = "/mcp"
    ) -> bytes:
        """A request to ``target``, as it goes on the wire (sent by the caller)."""
        if self.conn.our_state is h11.DONE:
            self.conn.start_next_cycle()
        data = b"" if body is None else json.dumps(body).encode()
        fields = [
            ("host", "127.0.0.1"),
            *([] if self.token is None else [("authorization", f"Bearer {self.token}")]),
            *headers.items(),
            ("content-length", str(len(data))),
        ]
        events = (
            h11.Request(method=method, target=target, headers=fields),
            h11.Data(data=data),
            h11.EndOfMessage(),
        )
        return b"".join(self.conn.send(event) or b"" for event in events)

    async def response_head(self) -> tuple[int, dict[str, str]]:
        head = await self._next()
        assert isinstance(head, h11.Response), head
        return head.status_code, {k.decode(): v.decode() for k, v in head.headers}

    async def body(self) -> bytes:
        data = b""
        while isinstance(event := await self._next(), h11.Data):
            data += event.data
        assert isinstance(event, h11.EndOfMessage), event
        return data

    async def request(
        self, method: str, headers: dict[str, str], body: Any = None
    ) -> tuple[int, dict[str, str], bytes]:
        status, head = await self.start(method, headers, body)
        return status, head, await self.body()

    async def message(self) -> dict[str, Any] | None:
        """The next message on an event stream (comments skipped), or None at its end."""
        while True:
            block, sep, rest = self._sse.partition(b"\n\n")
            if sep:
                self._sse = rest
                data = [ln[6:] for ln in block.split(b"\n") if ln.startswith(b"data: ")]
                if data:
                    return json.loads(b"\n".join(data))  # type: ignore[no-any-return]
                continue
            event = await self._next()
            if isinstance(event, h11.EndOfMessage):
                return None
            assert isinstance(event, h11.Data), event
            self._sse += event.data


async def open_session(
    daemon: Daemon, unix: str | None = None, capabilities: dict[str, Any] | None = None
) -> str:
    """initialize and initialized over HTTP; the session id."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    async with Client.open(daemon, unix=unix) as c:
        status, head, _ = await c.request("POST", POST, init)
        assert status == 200
        sid = head["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await c.request("POST", session_headers(sid), note))[0] == 202
    return sid


def session_headers(sid: str, **extra: str) -> dict[str, str]:
    return {**POST, "mcp-session-id": sid, "mcp-protocol-version": LEGACY, **extra}


def stream_headers(sid: str) -> dict[str, str]:
    return {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": LEGACY}
