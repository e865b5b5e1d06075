"""The echo server over Streamable HTTP, fast enough not to be what a bench row measures.

One thread, one ``selectors`` loop over non-blocking sockets, and a request parser that
does what this server needs and no more: a request line, headers up to a blank line, a
body of ``Content-Length`` bytes. Requests that arrive together are answered together,
in one ``send``. Every answer is what ``echo_server.EchoCore`` makes of the body, the
same as over stdio, so the routing headers of 2026-07-28 are checked as a real server
checks them.

Replies are ``application/json`` (one body with a ``Content-Length``), or with ``--sse``
a ``text/event-stream`` of one event, sent chunked as the SDKs' servers send streams.

    python bench/http_echo.py [--port 0] [--ready-file PATH] [--sse]

``echo_server.py --http PORT`` runs this same server in a thread beside its stdio.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import sys
import threading
from typing import TYPE_CHECKING

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.echo_server import HTTP_STATUS, Codec, EchoCore

if TYPE_CHECKING:
    from collections.abc import Callable

RECEIVE_SIZE = 256 * 1024
MAX_HEAD = 64 * 1024
REASONS = {200: "OK", 202: "Accepted", 400: "Bad Request", 404: "Not Found"}
REASONS.update({405: "Method Not Allowed", 411: "Length Required", 431: "Too Large"})
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


class Headers(dict[str, str]):
    """Request headers by lower-case name; ``get`` takes a name in any case."""

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return super().get(name.lower(), default)


def reply(status: int, body: bytes = b"", extra: bytes = b"") -> bytes:
    head = f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Length: {len(body)}\r\n"
    if body:
        head += "Content-Type: application/json\r\n"
    return head.encode() + extra + b"\r\n" + body


def event_stream(message: bytes) -> bytes:
    """One SSE event in one chunk, then the chunked body's end."""
    event = b"event: message\ndata: " + message + b"\n\n"
    return SSE_HEAD + b"%x\r\n" % len(event) + event + b"\r\n0\r\n\r\n"


class Conn:
    __slots__ = ("closing", "inbox", "outbox", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.inbox = b""
        self.outbox = bytearray()
        self.closing = False


class Server:
    def __init__(self, core: EchoCore, sse: bool) -> None:
        self.core = core
        self.sse = sse
        self.selector = selectors.DefaultSelector()

    def answer(self, method: bytes, target: bytes, headers: Headers, body: bytes) -> bytes:
        if target.split(b"?", 1)[0] != b"/mcp":
            return reply(404)
        if method != b"POST":
            return reply(405, extra=b"Allow: POST\r\n")
        response, code = self.core.handle(body, headers)
        if response is None:
            return reply(202)
        if self.sse and code == 0:
            return event_stream(response)
        return reply(HTTP_STATUS.get(code, 200), response)

    def take(self, conn: Conn) -> None:
        """Answer every complete request in the inbox, in order."""
        data = conn.inbox
        start = 0
        while True:
            end = data.find(b"\r\n\r\n", start)
            if end < 0:
                if len(data) - start > MAX_HEAD:
                    conn.outbox += reply(431)
                    conn.closing = True
                    start = len(data)
                break
            lines = data[start:end].split(b"\r\n")
            method, _, rest = lines[0].partition(b" ")
            target = rest.partition(b" ")[0]
            headers = Headers()
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
            if "transfer-encoding" in headers:
                conn.outbox += reply(411)
                conn.closing = True
                start = len(data)
                break
            length = int(headers.get("content-length") or 0)
            if end + 4 + length > len(data):
                break  # the body is still on its way
            body = data[end + 4 : end + 4 + length]
            start = end + 4 + length
            conn.outbox += self.answer(method, target, headers, body)
            if (headers.get("connection") or "").lower() == "close":
                conn.closing = True
                start = len(data)
                break
        conn.inbox = data[start:]

    def readable(self, conn: Conn) -> None:
        try:
            chunk = conn.sock.recv(RECEIVE_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.close(conn)
            return
        conn.inbox = conn.inbox + chunk if conn.inbox else chunk
        self.take(conn)
        self.flush(conn)

    def flush(self, conn: Conn) -> None:
        if conn.outbox:
            try:
                sent = conn.sock.send(conn.outbox)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self.close(conn)
                return
            del conn.outbox[:sent]
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.outbox else 0)
        if not conn.outbox and conn.closing:
            self.close(conn)
            return
        if self.selector.get_key(conn.sock).events != events:
            self.selector.modify(conn.sock, events, conn)

    def close(self, conn: Conn) -> None:
        self.selector.unregister(conn.sock)
        conn.sock.close()

    def accept(self, listener: socket.socket) -> None:
        try:
            sock, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.selector.register(sock, selectors.EVENT_READ, Conn(sock))

    def run(self, listener: socket.socket) -> None:
        listener.setblocking(False)
        self.selector.register(listener, selectors.EVENT_READ, None)
        while True:
            for key, events in self.selector.select():
                if key.data is None:
                    self.accept(listener)
                    continue
                conn: Conn = key.data
                if events & selectors.EVENT_READ:
                    self.readable(conn)
                elif events & selectors.EVENT_WRITE:
                    self.flush(conn)


def listen(port: int, ready_file: str | None) -> tuple[socket.socket, str]:
    listener = socket.create_server(("127.0.0.1", port), backlog=512)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
    if ready_file:
        with open(ready_file + ".tmp", "w") as f:
            f.write(url + "\n")
        os.replace(ready_file + ".tmp", ready_file)
    return listener, url


def start_in_thread(core: EchoCore, port: int, ready_file: str | None, sse: bool) -> None:
    listener, _ = listen(port, ready_file)
    run: Callable[[socket.socket], None] = Server(core, sse).run
    threading.Thread(target=run, args=(listener,), daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file")
    parser.add_argument("--sse", action="store_true", help="answer with an event stream")
    parser.add_argument("--tools", type=int, default=1)
    args = parser.parse_args(argv)
    core = EchoCore(Codec(False), args.tools, 100)
    listener, _ = listen(args.port, args.ready_file)
    with contextlib.suppress(KeyboardInterrupt):
        Server(core, args.sse).run(listener)
    return 0


if __name__ == "__main__":
    sys.exit(main())
