"""A Streamable HTTP MCP server on 127.0.0.1 that misbehaves on purpose.

``server/discover``, ``tools/list`` and ``ping`` are answered properly (keep-alive, h11),
so mcpd connects; ``tools/call`` misbehaves according to the tool's name, which it
reads from the ``Mcp-Name`` header before the body, so it can also cut the connection
while the request is still arriving. The faulty replies are written as raw bytes: h11
would refuse to produce most of them. Nothing here builds a large body in memory.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
from collections.abc import AsyncIterator
from typing import Any, Final

import h11
import trio

MODERN: Final = "2026-07-28"
TOOLS: Final = (
    "echo",
    "slow_headers",
    "slow_body",
    "chunked_cut",
    "sse_cut",
    "short_body",
    "redirects",
    "huge_body",
    "huge_chunked",
    "huge_sse",
    "invalid_utf8",
    "http10",
    "reset",
    "deaf",
    "huge_retry",
    "odd_redirect",
)
GIB: Final = 1 << 30
# No misbehaviour lasts longer than this, whatever the client does.
_LIMIT: Final = 30.0


def _result(rid: Any, result: dict[str, Any]) -> bytes:
    result.setdefault("resultType", "complete")
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()


def _text(rid: Any, text: str) -> bytes:
    return _result(rid, {"content": [{"type": "text", "text": text}]})


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class HostileHttp:
    def __init__(self, *, deaf: bool = False) -> None:
        self.port = 0
        self.deaf = deaf
        self.open_connections = 0
        self.redirects_served = 0
        self.bytes_streamed = 0

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def handle(self, stream: trio.SocketStream) -> None:
        self.open_connections += 1
        try:
            with trio.move_on_after(_LIMIT):
                await self._serve(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            pass
        finally:
            self.open_connections -= 1
            await trio.aclose_forcefully(stream)

    async def _serve(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        while True:
            if self.deaf:
                await trio.sleep_forever()  # accepted, never read
            head = await self._next(conn, stream)
            if not isinstance(head, h11.Request):
                return
            headers = {k.decode().lower(): v.decode("latin-1") for k, v in head.headers}
            tool = headers.get("mcp-name", "")
            if headers.get("mcp-method") == "tools/call" and tool == "reset":
                _reset(stream)  # while the body may still be on its way
                return
            body = bytearray()
            while True:
                event = await self._next(conn, stream)
                if isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
                else:
                    return
            target = head.target.decode()
            if target.startswith("/mcp/r"):
                hops = int(target.removeprefix("/mcp/r"))
                if hops < 100:
                    self.redirects_served += 1
                    await self._reply(conn, stream, 307, b"", [("Location", f"/mcp/r{hops + 1}")])
                    conn.start_next_cycle()
                    continue
            msg = json.loads(body) if body else {}
            if not await self._answer(conn, stream, msg, tool):
                return
            conn.start_next_cycle()

    async def _next(self, conn: h11.Connection, stream: trio.SocketStream) -> Any:
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            if self.deaf:
                await trio.sleep_forever()
            conn.receive_data(await stream.receive_some(65536))

    async def _reply(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        status: int,
        body: bytes,
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        items = [("Content-Length", str(len(body))), *(headers or [])]
        if body:
            items.append(("Content-Type", "application/json"))
        data = conn.send(h11.Response(status_code=status, headers=items)) or b""
        if body:
            data += conn.send(h11.Data(data=body)) or b""
        data += conn.send(h11.EndOfMessage()) or b""
        await stream.send_all(data)

    async def _answer(
        self, conn: h11.Connection, stream: trio.SocketStream, msg: dict[str, Any], tool: str
    ) -> bool:
        """Answer one message; False when the connection must end after it."""
        method = msg.get("method")
        rid = msg.get("id")
        if rid is None:
            await self._reply(conn, stream, 202, b"")
        elif method == "server/discover":
            discovered = {
                "supportedVersions": [MODERN],
                "capabilities": {"tools": {}},
                "ttlMs": 0,
                "cacheScope": "private",
            }
            await self._reply(conn, stream, 200, _result(rid, discovered))
        elif method == "tools/list":
            tools = [
                {"name": name, "inputSchema": {"type": "object"}, "description": name}
                for name in TOOLS
            ]
            await self._reply(conn, stream, 200, _result(rid, {"tools": tools}))
        elif method == "ping":
            await self._reply(conn, stream, 200, _result(rid, {}))
        elif method == "tools/call":
            text = str(((msg.get("params") or {}).get("arguments") or {}).get("text", ""))
            answer = _text(rid, f"{tool}:{text}")
            if tool == "echo":
                await self._reply(conn, stream, 200, answer)
            elif tool == "redirects":
                # Same origin every time, 100 hops in all: more than any client follows.
                await self._reply(conn, stream, 307, b"", [("Location", "/mcp/r1")])
            else:
                await self._misbehave(conn, stream, tool, rid, answer)
                return False
        else:
            error = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}}
            await self._reply(conn, stream, 200, json.dumps(error).encode())
        return True

    async def _misbehave(
        self, conn: h11.Connection, stream: trio.SocketStream, tool: str, rid: Any, answer: bytes
    ) -> None:
        send = stream.send_all
        ok_json = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        if tool == "slow_headers":
            head = ok_json + b"Content-Length: %d\r\n\r\n" % len(answer)
            for i in range(len(head)):
                await send(head[i : i + 1])
                await trio.sleep(0.25)
            await send(answer)
        elif tool == "slow_body":
            await send(ok_json + b"Content-Length: %d\r\n\r\n" % len(answer))
            for i in range(len(answer)):
                await send(answer[i : i + 1])
                await trio.sleep(1.0)
        elif tool == "chunked_cut":
            await send(ok_json + b"Transfer-Encoding: chunked\r\n\r\n")
            await send(b"%x\r\n" % len(answer) + answer[: len(answer) // 2])
        elif tool == "sse_cut":
            await send(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            note = {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": "hi"},
            }
            await send(_chunk(b"event: message\ndata: " + json.dumps(note).encode() + b"\n\n"))
            await send(_chunk(b"event: message\ndata: " + answer[: len(answer) // 2]))
        elif tool == "short_body":
            await send(ok_json + b"Content-Length: %d\r\n\r\n" % (len(answer) + 400))
            await send(answer)
        elif tool == "huge_body":
            await send(ok_json + b"Content-Length: %d\r\n\r\n" % (2 * GIB))
            await self._stream_bytes(send, 2 * GIB, chunked=False)
        elif tool == "huge_chunked":
            await send(ok_json + b"Transfer-Encoding: chunked\r\n\r\n")
            await self._stream_bytes(send, 2 * GIB, chunked=True)
        elif tool == "huge_sse":
            await send(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            await send(_chunk(b"event: message\ndata: "))
            await self._stream_bytes(send, 2 * GIB, chunked=True)
        elif tool == "invalid_utf8":
            body = answer[:-2] + b',"_meta":{"note":"\xff\xfe bad \xc3"}}}'
            # A complete reply: the close is announced, or a client may reuse the connection.
            head = ok_json + b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
            await send(head + body)
        elif tool == "odd_redirect":
            # Same origin, but a target no request line may carry as it is.
            await send(
                b"HTTP/1.1 308 Permanent Redirect\r\nLocation: /mcp/a b\xc3\xa9\r\n"
                b"Connection: close\r\nContent-Length: 0\r\n\r\n"
            )
        elif tool == "huge_retry":
            # A reconnection time of 5,000 digits, then the answer itself.
            body = b"retry: " + b"9" * 5000 + b"\nevent: message\ndata: " + answer + b"\n\n"
            await send(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body) + body
            )
        elif tool == "http10":
            await send(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + answer)
        elif tool == "deaf":
            self.deaf = True
            await trio.sleep_forever()

    async def _stream_bytes(self, send: Any, total: int, *, chunked: bool) -> None:
        piece = b"x" * 65536
        framed = _chunk(piece) if chunked else piece
        sent = 0
        while sent < total:
            await send(framed)
            sent += len(piece)
            self.bytes_streamed += len(piece)


def _reset(stream: trio.SocketStream) -> None:
    """Close with RST instead of FIN."""
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    stream.socket.close()


@contextlib.asynccontextmanager
async def serve_hostile_http(*, deaf: bool = False) -> AsyncIterator[HostileHttp]:
    server = HostileHttp(deaf=deaf)
    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        server.port = listeners[0].socket.getsockname()[1]
        await nursery.start(trio.serve_listeners, server.handle, listeners)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
