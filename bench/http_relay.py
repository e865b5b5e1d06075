"""A bare HTTP relay: the floor for one Python hop from the socket's line protocol to a
Streamable HTTP server.

It listens on a Unix socket and reads lines. Each line is POSTed to the server as it
came, over a pool of kept-alive HTTP/1.1 connections (trio and h11), one request at a
time on each; the body of the reply (or the data of its event stream's message) goes
back as a line. The routing headers 2026-07-28 asks for (``MCP-Protocol-Version``,
``Mcp-Method``, ``Mcp-Name``) are read off the line, which is decoded that far and no
further. A worker task holds each connection and takes lines from a queue; workers are
started as lines wait, up to ``--pool``.

That is all: no ids of its own, no check of what comes back, no time limit, session or
credentials. It is not a proxy anyone should use; it measures what an HTTP hop costs in
Python, so that the bench can show how much of mcpd's HTTP path is that.

    python -m bench.http_relay --socket /tmp/h.sock --url http://127.0.0.1:8000/mcp
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from urllib.parse import urlsplit

import h11
import msgspec
import trio

from bench.relay import CHUNK, listen

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"


class _Meta(msgspec.Struct):
    version: str | None = msgspec.field(default=None, name=VERSION_KEY)


class _Params(msgspec.Struct):
    name: str | None = None
    meta: _Meta | None = msgspec.field(default=None, name="_meta")


class _Line(msgspec.Struct):
    method: str | None = None
    params: _Params | None = None


decode_line = msgspec.json.Decoder(_Line).decode


def event_data(body: bytes) -> bytes:
    """The data of an event stream's first event that has any."""
    for line in body.split(b"\n"):
        if line.startswith(b"data:"):
            return line[5:].strip()
    return b""


class Relay:
    def __init__(self, client: trio.SocketStream, url: str, pool: int) -> None:
        parts = urlsplit(url)
        self.client = client
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.target = ((parts.path or "/") + (f"?{parts.query}" if parts.query else "")).encode()
        self.base = [
            (b"Host", f"{self.host}:{self.port}".encode()),
            (b"Content-Type", b"application/json"),
            (b"Accept", b"application/json, text/event-stream"),
        ]
        self.pool = pool
        self.workers = 0
        self.idle = 0  # workers waiting for a line
        self.waiting = 0  # lines waiting for a worker
        self.send_line, self.lines = trio.open_memory_channel[bytes](math.inf)
        self.outbox = bytearray()
        self.wrote = trio.Event()

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            nursery.start_soon(self.write_loop)
            await self.read_loop()
            nursery.cancel_scope.cancel()

    async def read_loop(self) -> None:
        rest = b""
        while chunk := await self.client.receive_some(CHUNK):
            data = rest + chunk if rest else chunk
            start = 0
            while (end := data.find(b"\n", start)) >= 0:
                if end > start:
                    self.send_line.send_nowait(data[start:end])
                    self.waiting += 1
                    if self.waiting > self.idle and self.workers < self.pool:
                        self.workers += 1
                        self.idle += 1
                        self.nursery.start_soon(self.worker)
                start = end + 1
            rest = data[start:]

    async def write_loop(self) -> None:
        while True:
            await self.wrote.wait()
            self.wrote = trio.Event()
            data = bytes(self.outbox)
            self.outbox.clear()
            await self.client.send_all(data)

    def headers(self, line: bytes) -> list[tuple[bytes, bytes]]:
        msg = decode_line(line)
        out = [*self.base, (b"Content-Length", str(len(line)).encode())]
        params = msg.params
        if params is not None and params.meta is not None and params.meta.version:
            out.append((b"MCP-Protocol-Version", params.meta.version.encode()))
            if msg.method is not None:
                out.append((b"Mcp-Method", msg.method.encode()))
            if params.name is not None:
                out.append((b"Mcp-Name", params.name.encode()))
        return out

    async def worker(self) -> None:
        stream = await trio.open_tcp_stream(self.host, self.port)
        conn = h11.Connection(h11.CLIENT)
        async with stream:
            while True:
                line = await self.lines.receive()
                self.waiting -= 1
                self.idle -= 1
                request = h11.Request(
                    method=b"POST", target=self.target, headers=self.headers(line)
                )
                data = conn.send(request) or b""
                data += conn.send(h11.Data(data=line)) or b""
                data += conn.send(h11.EndOfMessage()) or b""
                await stream.send_all(data)
                body = b""
                stream_reply = False
                while True:
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        conn.receive_data(await stream.receive_some(CHUNK))
                    elif isinstance(event, h11.Response):
                        kind = dict(event.headers).get(b"content-type", b"")
                        stream_reply = kind.startswith(b"text/event-stream")
                    elif isinstance(event, h11.Data):
                        body += event.data
                    elif isinstance(event, h11.EndOfMessage):
                        break
                conn.start_next_cycle()
                if stream_reply:
                    body = event_data(body)
                if body:
                    self.outbox += body + b"\n"
                    self.wrote.set()
                self.idle += 1


async def serve(
    socket_path: str,
    url: str,
    pool: int,
    *,
    task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED,
) -> None:
    async def handle(client: trio.SocketStream) -> None:
        async with client:
            try:
                await Relay(client, url, pool).run()
            except (OSError, trio.BrokenResourceError, h11.ProtocolError) as exc:
                print(f"http_relay: connection failed: {exc!r}", file=sys.stderr)

    await listen(socket_path, handle, task_status=task_status)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="bare line-to-HTTP relay on a Unix socket")
    parser.add_argument("--socket", required=True, help="Unix socket to listen on")
    parser.add_argument("--url", required=True, help="the Streamable HTTP endpoint")
    parser.add_argument("--pool", type=int, default=64, help="connections at most")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(serve, args.socket, args.url, args.pool)
    return 0


if __name__ == "__main__":
    sys.exit(main())
