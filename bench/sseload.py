"""The load generator's HTTP+SSE side (MCP 2024-11-05): replies come on one event
stream, and each POST is only accepted. ``SseClient`` does the handshake and listing as
``HttpClient`` does; ``SsePump`` keeps N calls in flight on N POST connections and reads
their replies off the stream (mcp-hub serves its agents this way).
"""

from __future__ import annotations

import contextlib
import selectors
import time
from typing import Any
from urllib.parse import urlsplit

from bench.httpload import RECEIVE_SIZE, BadReply, HttpClient, HttpPump, Link
from bench.loadgen import REQUEST_PREFIX, SPIN, call_suffix
from bench.wire import RPCError, request_line


class Dechunker:
    """A chunked body read as it comes: ``feed`` bytes, ``take`` what they decode to."""

    def __init__(self) -> None:
        self.raw = bytearray()
        self.out = bytearray()

    def feed(self, data: bytes) -> None:
        self.raw += data
        while True:
            line_end = self.raw.find(b"\r\n")
            if line_end < 0:
                return
            size = int(bytes(self.raw[:line_end]).split(b";", 1)[0], 16)
            if len(self.raw) < line_end + 2 + size + 2:
                return
            self.out += self.raw[line_end + 2 : line_end + 2 + size]
            del self.raw[: line_end + 2 + size + 2]

    def events(self) -> list[tuple[bytes, bytes]]:
        """The whole events decoded so far, as (type, data)."""
        out: list[tuple[bytes, bytes]] = []
        text = self.out.replace(b"\r\n", b"\n")
        end = text.rfind(b"\n\n")
        if end < 0:
            return out
        for event in bytes(text[:end]).split(b"\n\n"):
            kind, data = b"message", []
            for line in event.split(b"\n"):
                field, _, value = line.partition(b":")
                value = value[1:] if value.startswith(b" ") else value
                if field == b"data":
                    data.append(value)
                elif field == b"event":
                    kind = value
            if data:
                out.append((kind, b"\n".join(data)))
        self.out = bytearray(text[end + 2 :])
        return out


class SseClient(HttpClient):
    """An HTTP+SSE (2024-11-05) client: replies come on the event stream, each POST is
    only accepted."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        assert self.sock is not None
        self.sock.sendall(
            f"GET {self.target} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Accept: text/event-stream\r\n\r\n".encode()
        )
        self.stream = self.sock
        self.events = Dechunker()
        rest = bytearray()
        while (end := rest.find(b"\r\n\r\n")) < 0:
            rest += self.stream.recv(RECEIVE_SIZE)
        self.events.feed(bytes(rest[end + 4 :]))
        self.queued: list[tuple[bytes, bytes]] = []
        endpoint = self.next_event(b"endpoint").decode()
        self.target = endpoint if endpoint.startswith("/") else urlsplit(endpoint).path
        self.poster = self.open()
        self.sock = self.poster  # the POSTs' connection
        self.inbox = bytearray()

    def next_event(self, kind: bytes = b"message") -> bytes:
        while True:
            self.queued += self.events.events()
            for i, (got, data) in enumerate(self.queued):
                if got == kind:
                    del self.queued[i]
                    return data
            self.events.feed(self.stream.recv(RECEIVE_SIZE))

    def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> Any:
        msg_id = self.next_id
        self.next_id += 1
        got = self.post(method, request_line(msg_id, method, params, self.modern))
        if got.status >= 300:
            raise BadReply(f"HTTP {got.status} to {method}: {got.body[:200]!r}")
        while True:
            reply = self.decode(self.next_event())
            if reply.id == msg_id and reply.method is None:
                break
        if reply.error is not None:
            raise RPCError(reply.error)
        return reply.result


class SsePump(HttpPump):
    """``Pump``'s cells on an HTTP+SSE server: N POST connections, the replies on the
    one event stream."""

    def __init__(self, client: SseClient, tool: str, modern: bool) -> None:
        super().__init__(client, tool, modern)
        self.sse = client

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
        stream = self.sse.stream
        stream.setblocking(False)
        sel = selectors.DefaultSelector()
        sel.register(stream, selectors.EVENT_READ)
        by_id: dict[int, Link] = {}
        for link in links:
            sel.register(link.sock, selectors.EVENT_READ)

        def issue(link: Link, now: int) -> None:
            nonlocal to_send
            to_send -= 1
            msg_id = self.next_id
            self.next_id += 1
            body = REQUEST_PREFIX + str(msg_id).encode() + suffix
            link.sent_at = now
            by_id[msg_id] = link
            link.sock.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)

        now = clock()
        for link in links:
            issue(link, now)
        while by_id:
            ready = sel.select(0)
            if not ready:
                began = clock()
                while not ready and clock() - began < SPIN:
                    ready = sel.select(0)
                polled += clock() - began
                if not ready and not (ready := sel.select(30.0)):
                    raise TimeoutError(f"{len(by_id)} calls got no answer in 30 s")
            for key, _ in ready:
                if key.fileobj is not stream:
                    with contextlib.suppress(BlockingIOError):
                        key.fileobj.recv(RECEIVE_SIZE)  # type: ignore[union-attr]
                    continue  # "Accepted": the reply comes on the stream
                with contextlib.suppress(BlockingIOError):
                    self.sse.events.feed(stream.recv(RECEIVE_SIZE))
                now = clock()
                for _, message in self.sse.events.events():
                    got, ok = self._classify(message)
                    link = by_id.pop(got, None)  # type: ignore[arg-type]
                    if link is None:
                        continue
                    latencies.append(now - link.sent_at)
                    if not ok:
                        errors += 1
                        first_error = first_error or message[:300].decode(errors="replace")
                    elif check_this:
                        self.checked[payload] = self._check(message, payload)
                        check_this = False
                    if to_send > 0 and (deadline is None or now < deadline):
                        issue(link, now)
        sel.close()
        stream.setblocking(True)
        return {
            "latencies": latencies,
            "errors": errors,
            "first_error": first_error,
            "polled_s": polled / 1e9,
        }
