"""The client side of MCP that the benchmarks need: request lines and a blocking line client.

Used for handshakes and listings, where clarity matters more than speed; the hot loop of
the load generator builds its request lines itself (see ``loadgen``).
"""

from __future__ import annotations

import os
import select
import socket
import time
from typing import Any, cast

import msgspec

# The echo server is run as a bare script; its line splitter serves the client too.

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
CLIENT_INFO = {"name": "mcpd-bench", "version": "1"}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
}

encode = msgspec.json.Encoder().encode


class RPCError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error


class Reply(msgspec.Struct):
    id: int | str | None = None
    method: str | None = None
    # An empty Raw means "absent": msgspec does not accept Raw inside a union.
    result: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    error: dict[str, Any] | None = None


class ToolName(msgspec.Struct):
    name: str


class ToolPage(msgspec.Struct):
    tools: list[ToolName]
    nextCursor: str | None = None


def params_for(params: dict[str, Any] | None, modern: bool) -> dict[str, Any] | None:
    """Modern requests carry the full envelope on every request's params."""
    if not modern:
        return params
    out = dict(params or {})
    out["_meta"] = ENVELOPE
    return out


def request_line(msg_id: int, method: str, params: dict[str, Any] | None, modern: bool) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    p = params_for(params, modern)
    if p is not None:
        msg["params"] = p
    return encode(msg) + b"\n"


class LineClient:
    """Blocking newline-delimited JSON-RPC over a Unix socket or a pair of pipe fds."""

    def __init__(self, rfd: int, wfd: int, sock: socket.socket | None = None) -> None:
        self.rfd = rfd
        self.wfd = wfd
        self.sock = sock  # kept so that the socket lives as long as the client
        self.buffer = b""
        self.next_id = 1
        self.modern = True
        self.pages_listed = 0  # pages in the last list_tools()
        self.decode = msgspec.json.Decoder(Reply).decode

    @classmethod
    def connect(cls, path: str, timeout: float = 10.0) -> LineClient:
        deadline = time.monotonic() + timeout
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        return cls(sock.fileno(), sock.fileno(), sock)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()

    def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.wfd, view) :]

    def read_line(self, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not readable(self.rfd, left):
                raise TimeoutError(f"no reply within {timeout} s")
            chunk = os.read(self.rfd, 256 * 1024)
            if not chunk:
                raise ConnectionError("peer closed the connection")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> Any:
        """Send one request and return its raw result, skipping notifications on the way."""
        msg_id = self.next_id
        self.next_id += 1
        self.send(request_line(msg_id, method, params, self.modern))
        while True:
            reply = self.decode(self.read_line(timeout))
            if reply.id is None and reply.error is not None:
                raise RPCError(reply.error)  # the peer could not even read our id
            if reply.method is not None or reply.id != msg_id:
                continue
            if reply.error is not None:
                raise RPCError(reply.error)
            return reply.result

    def handshake(self, modern: bool = True) -> dict[str, Any]:
        self.modern = modern
        # Both results are JSON objects (the MCP schema says so).
        if modern:
            return cast(dict[str, Any], msgspec.json.decode(self.request("server/discover")))
        result = self.request(
            "initialize",
            {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT_INFO},
        )
        self.send(encode({"jsonrpc": "2.0", "method": "notifications/initialized"}) + b"\n")
        return cast(dict[str, Any], msgspec.json.decode(result))

    def list_tools(self, max_pages: int = 10_000) -> list[str]:
        names: list[str] = []
        cursor: str | None = None
        page_decode = msgspec.json.Decoder(ToolPage).decode
        for pages in range(1, max_pages + 1):
            params = {"cursor": cursor} if cursor is not None else None
            page = page_decode(self.request("tools/list", params))
            names.extend(t.name for t in page.tools)
            cursor = page.nextCursor
            if cursor is None:
                self.pages_listed = pages
                return names
        raise RuntimeError(f"tools/list did not end within {max_pages} pages")


def readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` has something to read within ``timeout`` seconds: poll, not
    select, which refuses a descriptor numbered past 1023 in a busy process."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))
