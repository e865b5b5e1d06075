"""The load generator's Streamable HTTP side: it speaks to an MCP endpoint itself.

``HttpClient`` does the handshake and the listing (either era: a legacy server's
``Mcp-Session-Id`` and protocol version go on every later request), one POST at a time
on a kept-alive connection. ``HttpPump`` then keeps N calls in flight on N kept-alive
connections, one call on each, in the same polled selector loop as the line pump: a
request is its head built once per cell up to the id, and a reply is read as far as its
framing says (``Content-Length``, or chunks) and, for an event stream, to its event's
data. Either way the reply is then classified as a line reply is.
"""

from __future__ import annotations

import selectors
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import msgspec

from bench.loadgen import REQUEST_PREFIX, SPIN, CallReply, Pump, call_suffix
from bench.wire import LineClient, RPCError, request_line

RECEIVE_SIZE = 256 * 1024
MODERN = "2026-07-28"


class BadReply(Exception):
    pass


class Reply:
    """One whole reply: its status, head (lower case) and body."""

    __slots__ = ("body", "head", "status")

    def __init__(self, status: int, head: bytes, body: bytes) -> None:
        self.status = status
        self.head = head
        self.body = body

    def header(self, name: bytes) -> str | None:
        at = self.head.find(b"\r\n" + name + b":")
        if at < 0:
            return None
        start = at + len(name) + 3
        end = self.head.find(b"\r\n", start)
        return self.head[start : end if end >= 0 else len(self.head)].strip().decode("latin-1")

    @property
    def message(self) -> bytes:
        """The JSON-RPC message: the body, or its event stream's response event."""
        if b"\r\ncontent-type: text/event-stream" not in self.head:
            return self.body
        return event_message(self.body)


def parse_reply(data: bytearray) -> tuple[int, Reply] | None:
    """(bytes used, the reply) of the first whole reply in ``data``; None while it is
    incomplete."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = bytes(data[:end]).lower()
    status = int(head[9:12])
    start = end + 4
    if b"\r\ntransfer-encoding: chunked" in head:
        body = bytearray()
        at = start
        while True:
            line_end = data.find(b"\r\n", at)
            if line_end < 0:
                return None
            size = int(bytes(data[at:line_end]).split(b";", 1)[0], 16)
            if size == 0:
                trailer = data.find(b"\r\n\r\n", line_end)
                if trailer < 0:
                    return None
                return trailer + 4, Reply(status, head, bytes(body))
            chunk_end = line_end + 2 + size
            if len(data) < chunk_end + 2:
                return None
            body += data[line_end + 2 : chunk_end]
            at = chunk_end + 2
    at = head.find(b"\r\ncontent-length:")
    length = 0
    if at >= 0:
        line_end = head.find(b"\r\n", at + 2)
        length = int(head[at + 17 : line_end if line_end >= 0 else None])
    if len(data) < start + length:
        return None
    return start + length, Reply(status, head, bytes(data[start : start + length]))


def event_message(body: bytes) -> bytes:
    """The response in an event stream: the data of its first ``message`` event that is
    not a request or notification of the server's."""
    for event in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        kind = b"message"
        data: list[bytes] = []
        for line in event.split(b"\n"):
            field, _, value = line.partition(b":")
            value = value[1:] if value.startswith(b" ") else value
            if field == b"data":
                data.append(value)
            elif field == b"event":
                kind = value
        if data and kind == b"message":
            message = b"\n".join(data)
            if b'"method"' not in message[:64] or b'"result"' in message:
                return message
    raise BadReply(f"no response in the event stream: {body[:200]!r}")


class HttpClient(LineClient):
    """A blocking Streamable HTTP client with ``LineClient``'s requests."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.session: str | None = None
        self.version: str | None = None
        sock = self.open()
        super().__init__(sock.fileno(), sock.fileno(), sock)
        self.inbox = bytearray()

    def open(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def head(self, method: str, name: str | None = None) -> bytes:
        """The request's head without its Content-Length."""
        lines = [
            f"POST {self.target} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
        ]
        version = MODERN if self.modern else self.version
        if version is not None:
            lines.append(f"MCP-Protocol-Version: {version}")
        if self.modern:
            lines.append(f"Mcp-Method: {method}")
            if name is not None:
                lines.append(f"Mcp-Name: {name}")
        if self.session is not None:
            lines.append(f"Mcp-Session-Id: {self.session}")
        return ("\r\n".join(lines) + "\r\n").encode()

    def post(self, method: str, body: bytes) -> Reply:
        assert self.sock is not None
        self.sock.sendall(self.head(method) + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        while (parsed := parse_reply(self.inbox)) is None:
            chunk = self.sock.recv(RECEIVE_SIZE)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self.inbox += chunk
        used, reply = parsed
        del self.inbox[:used]
        return reply

    def send(self, data: bytes) -> None:
        """A notification (the handshake's ``notifications/initialized``)."""
        self.post(msgspec.json.decode(data)["method"], data.rstrip(b"\n"))

    def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> Any:
        msg_id = self.next_id
        self.next_id += 1
        got = self.post(method, request_line(msg_id, method, params, self.modern))
        if self.session is None:
            self.session = got.header(b"mcp-session-id")
        reply = self.decode(got.message)
        if reply.error is not None:
            raise RPCError(reply.error)
        if got.status != 200:
            raise BadReply(f"HTTP {got.status} to {method}: {got.body[:200]!r}")
        if method == "initialize":
            self.version = msgspec.json.decode(reply.result)["protocolVersion"]
        return reply.result


class Link:
    """One kept-alive connection of the pump, with at most one call on it."""

    __slots__ = ("inbox", "outbox", "sent_at", "sock", "writing")

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.inbox = bytearray()
        self.outbox = b""
        self.sent_at = 0
        self.writing = False


class HttpPump(Pump):
    """``Pump``'s cells over N connections, one call in flight on each."""

    def __init__(self, client: HttpClient, tool: str, modern: bool) -> None:
        self.client = client
        self.tool = tool
        self.modern = modern
        self.next_id = client.next_id + 1000
        self.decode = msgspec.json.Decoder(CallReply).decode
        self.checked: dict[int, str] = {}
        assert client.sock is not None
        self.links = [Link(client.sock)]
        self.links[0].inbox = client.inbox

    def run(
        self, concurrency: int, payload: int, duration: float | None, count: int | None
    ) -> dict[str, Any]:
        while len(self.links) < concurrency:
            self.links.append(Link(self.client.open()))
        links = self.links[:concurrency]
        head = self.client.head("tools/call", self.tool)
        suffix = call_suffix(self.tool, payload, self.modern).rstrip(b"\n")
        latencies: list[int] = []
        errors = 0
        first_error = ""
        polled = 0
        clock = time.perf_counter_ns
        deadline = clock() + int(duration * 1e9) if duration else None
        to_send = count if count else 1 << 62
        check_this = payload not in self.checked
        sel = selectors.DefaultSelector()
        busy: dict[int, int] = {}  # fd -> id of the call on it
        by_fd = {link.sock.fileno(): link for link in links}

        def issue(link: Link, now: int) -> None:
            nonlocal to_send
            to_send -= 1
            msg_id = self.next_id
            self.next_id += 1
            body = REQUEST_PREFIX + str(msg_id).encode() + suffix
            link.outbox = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
            link.sent_at = now
            busy[link.sock.fileno()] = msg_id
            flush(link)

        def flush(link: Link) -> None:
            try:
                sent = link.sock.send(link.outbox)
            except BlockingIOError:
                sent = 0
            link.outbox = link.outbox[sent:]
            if bool(link.outbox) != link.writing:
                link.writing = bool(link.outbox)
                mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if link.writing else 0)
                sel.modify(link.sock, mask)

        for link in links:
            link.writing = False
            sel.register(link.sock, selectors.EVENT_READ)
        now = clock()
        for link in links:
            if to_send > 0:
                issue(link, now)
        while busy:
            ready = sel.select(0)
            if not ready:
                began = clock()
                while not ready and clock() - began < SPIN:
                    ready = sel.select(0)
                polled += clock() - began
                if not ready:
                    ready = sel.select(30.0)
                    if not ready:
                        raise TimeoutError(f"{len(busy)} calls got no answer in 30 s")
            for key, events in ready:
                link = by_fd[key.fd]
                if events & selectors.EVENT_WRITE and link.outbox:
                    flush(link)
                if not events & selectors.EVENT_READ:
                    continue
                try:
                    chunk = link.sock.recv(RECEIVE_SIZE)
                except BlockingIOError:
                    continue
                if not chunk:
                    raise ConnectionError("the target closed a connection")
                link.inbox += chunk
                parsed = parse_reply(link.inbox)
                if parsed is None:
                    continue
                used, reply = parsed
                del link.inbox[:used]
                now = clock()
                latencies.append(now - link.sent_at)
                msg_id = busy.pop(key.fd)
                status = reply.status
                message = reply.message if status == 200 else reply.body
                got, ok = self._classify(message)
                if status != 200 or got != msg_id or not ok:
                    errors += 1
                    first_error = first_error or f"HTTP {status}: {message[:300]!r}"
                elif check_this:
                    self.checked[payload] = self._check(message, payload)
                    check_this = False
                if to_send > 0 and (deadline is None or now < deadline):
                    issue(link, now)
        sel.close()
        return {
            "latencies": latencies,
            "errors": errors,
            "first_error": first_error,
            "polled_s": polled / 1e9,
        }
