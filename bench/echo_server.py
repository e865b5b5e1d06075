"""A fast MCP echo server for the benchmarks: stdio, and optionally Streamable HTTP.

It speaks both protocol eras. A request whose ``params._meta`` carries
``io.modelcontextprotocol/protocolVersion`` is served as 2026-07-28 (the envelope is checked,
results carry ``resultType``); anything else is served the legacy way (``initialize``,
``notifications/initialized``, ``ping``, results without ``resultType``).

Tools: ``echo`` returns its ``text`` argument as one text block; ``--tools N`` adds
``tool_0001`` ... so the server exposes N tools (all echo), listed in pages of ``--page-size``.

Only the standard library and msgspec are imported, and http.server only with ``--http``,
so that fifty of these start quickly.

    python bench/echo_server.py [--tools N] [--page-size P] [--sleep S]
                                [--http PORT [--ready-file PATH]]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import msgspec

MODERN = "2026-07-28"
LEGACY = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
KEY_VERSION = "io.modelcontextprotocol/protocolVersion"
KEY_CAPS = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO = {"name": "bench-echo", "version": "1.0"}
RESULT_META = {"io.modelcontextprotocol/serverInfo": SERVER_INFO}

# Small enough that a batch of 16 KiB requests is answered while the client is still
# sending the next ones, instead of both sides taking turns.
READ_SIZE = 64 * 1024

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
HEADER_MISMATCH = -32020
UNSUPPORTED_VERSION = -32022

# What an HTTP status a JSON-RPC error maps to, as the spec's table and the SDK do it.
HTTP_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    -32021: 400,
    UNSUPPORTED_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}


class Envelope(msgspec.Struct):
    version: str | None = msgspec.field(name=KEY_VERSION, default=None)
    capabilities: dict[str, Any] | None = msgspec.field(name=KEY_CAPS, default=None)


class Arguments(msgspec.Struct):
    # Kept as the raw JSON string: it goes back out byte for byte, so a 16 KiB text is
    # never decoded and re-encoded.
    text: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class Params(msgspec.Struct):
    meta: Envelope | None = msgspec.field(name="_meta", default=None)
    name: str | None = None
    arguments: Arguments | None = None
    cursor: str | None = None
    protocolVersion: str | None = None


class Message(msgspec.Struct):
    id: int | str | None = None
    method: str | None = None
    params: Params | None = None


class IdOnly(msgspec.Struct):
    id: int | str | None = None


class TextBlock(msgspec.Struct, tag_field="type", tag="text"):
    text: msgspec.Raw


class CallResult(msgspec.Struct, omit_defaults=True):
    content: list[TextBlock]
    isError: bool = False
    resultType: str | None = None
    meta: dict[str, Any] | None = msgspec.field(name="_meta", default=None)


class Response(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    id: int | str | None
    result: Any


class ErrorBody(msgspec.Struct, omit_defaults=True):
    code: int
    message: str
    data: Any = None


class ErrorResponse(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    id: int | str | None
    error: ErrorBody


class RPCError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def make_tools(count: int) -> list[dict[str, Any]]:
    schema = {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "Text to send back."}},
        "required": ["text"],
    }
    tools = [
        {"name": "echo", "description": "Return the given text unchanged.", "inputSchema": schema}
    ]
    for i in range(1, count):
        tools.append(
            {
                "name": f"tool_{i:04d}",
                "description": f"Benchmark tool {i} of {count}: returns the given text unchanged.",
                "inputSchema": schema,
            }
        )
    return tools


class EchoCore:
    """Turns one request line into one response line; shared by stdio and HTTP."""

    def __init__(self, tool_count: int, page_size: int) -> None:
        self.tools = make_tools(max(1, tool_count))
        self.tool_names = frozenset(t["name"] for t in self.tools)
        self.page_size = max(1, page_size)
        self.decode = msgspec.json.Decoder(Message).decode
        self.encode = msgspec.json.Encoder().encode
        # Pages never change, so they are encoded once per era and spliced in as Raw.
        self.pages: dict[tuple[bool, int], msgspec.Raw] = {}

    def handle(self, line: bytes, http_headers: Any = None) -> tuple[bytes | None, int]:
        """Returns (response line without newline or None for a notification, error code)."""
        try:
            msg = self.decode(line)
        except msgspec.DecodeError as exc:
            return self._bad_message(line, exc)
        if msg.method is None:
            return None, 0  # a response from the client; this server never sends requests
        if msg.id is None:
            return None, 0  # notifications/initialized, notifications/cancelled, ...
        try:
            result = self._dispatch(msg, http_headers)
        except RPCError as exc:
            return self._error(msg.id, exc), exc.code
        return self.encode(Response(id=msg.id, result=result)), 0

    def _bad_message(self, line: bytes, exc: Exception) -> tuple[bytes, int]:
        """Valid JSON of the wrong shape still gets its id back, with -32602."""
        try:
            msg_id = msgspec.json.decode(line, type=IdOnly).id
        except msgspec.DecodeError:
            return self._error(None, RPCError(PARSE_ERROR, f"Parse error: {exc}")), PARSE_ERROR
        error = RPCError(INVALID_PARAMS, f"Invalid params: {exc}")
        return self._error(msg_id, error), INVALID_PARAMS

    def _error(self, msg_id: int | str | None, exc: RPCError) -> bytes:
        return self.encode(
            ErrorResponse(id=msg_id, error=ErrorBody(exc.code, exc.message, exc.data))
        )

    def _dispatch(self, msg: Message, headers: Any) -> Any:
        method = msg.method
        params = msg.params or Params()
        meta = params.meta
        modern = meta is not None and meta.version is not None
        if method == "initialize":
            asked = params.protocolVersion
            return {
                "protocolVersion": asked if asked in LEGACY else LEGACY[0],
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": SERVER_INFO,
            }
        if method == "ping":
            return {}
        if modern:
            self._check_envelope(msg, meta, headers)
        elif method == "server/discover":
            # Without the envelope this is a legacy-era request, and discover is not a
            # legacy method.
            raise RPCError(METHOD_NOT_FOUND, "Method not found", method)
        if method == "tools/call":
            return self._call(params, modern)
        if method == "tools/list":
            return self._list(params, modern)
        if method == "server/discover":
            return {
                "resultType": "complete",
                "supportedVersions": [MODERN],
                "capabilities": {"tools": {"listChanged": False}},
                "ttlMs": 0,
                "cacheScope": "public",
                "_meta": RESULT_META,
            }
        raise RPCError(METHOD_NOT_FOUND, "Method not found", method)

    def _check_envelope(self, msg: Message, meta: Any, headers: Any) -> None:
        if meta.capabilities is None:
            raise RPCError(INVALID_PARAMS, f"params._meta is missing {KEY_CAPS}")
        if meta.version != MODERN:
            raise RPCError(
                UNSUPPORTED_VERSION,
                "Unsupported protocol version",
                {"supported": [MODERN], "requested": meta.version},
            )
        if headers is None:
            return
        # Streamable HTTP 2026-07-28: the routing headers must mirror the body.
        if headers.get("MCP-Protocol-Version") != meta.version:
            raise RPCError(HEADER_MISMATCH, "Header mismatch: MCP-Protocol-Version")
        if headers.get("Mcp-Method") != msg.method:
            raise RPCError(HEADER_MISMATCH, "Header mismatch: Mcp-Method")
        if msg.method == "tools/call" and headers.get("Mcp-Name") != msg.params.name:
            raise RPCError(HEADER_MISMATCH, "Header mismatch: Mcp-Name")

    def _call(self, params: Params, modern: bool) -> CallResult:
        if params.name not in self.tool_names:
            raise RPCError(INVALID_PARAMS, f"Unknown tool: {params.name}")
        text = params.arguments.text if params.arguments else None
        if not text or not bytes(text).startswith(b'"'):
            raise RPCError(INVALID_PARAMS, "arguments.text must be a string")
        if modern:
            return CallResult([TextBlock(text)], resultType="complete", meta=RESULT_META)
        return CallResult([TextBlock(text)])

    def _list(self, params: Params, modern: bool) -> msgspec.Raw:
        cursor = params.cursor
        if cursor is None:
            start = 0
        else:
            try:
                start = int(cursor)
            except ValueError:
                start = -1
            if start < 0 or start >= len(self.tools) or start % self.page_size:
                raise RPCError(INVALID_PARAMS, f"invalid cursor: {cursor!r}")
        page = self.pages.get((modern, start))
        if page is None:
            end = start + self.page_size
            result: dict[str, Any] = {"tools": self.tools[start:end]}
            if end < len(self.tools):
                result["nextCursor"] = str(end)
            if modern:
                result.update(
                    resultType="complete", ttlMs=0, cacheScope="public", _meta=RESULT_META
                )
            page = self.pages[(modern, start)] = msgspec.Raw(self.encode(result))
        return page


def serve_stdio(core: EchoCore) -> None:
    """Read whatever is available, answer every complete line, write the answers at once.

    Answering a whole batch with one write keeps many in-flight requests cheap.
    """
    pending = b""
    while True:
        chunk = os.read(0, READ_SIZE)
        if not chunk:
            return
        data = pending + chunk if pending else chunk
        lines, pending = split_lines(data)
        out = []
        for line in lines:
            response, _ = core.handle(line)
            if response is not None:
                out.append(response)
        if out:
            out.append(b"")
            write_all(1, b"\n".join(out))


def split_lines(data: bytes) -> tuple[list[bytes], bytes]:
    """Complete non-blank lines and the unfinished rest.

    find() is memchr; bytes.split(b"\n") walks byte by byte and costs several times more
    on 16 KiB lines.
    """
    lines = []
    start = 0
    find = data.find
    while (end := find(b"\n", start)) >= 0:
        if end > start:
            lines.append(data[start:end])
        start = end + 1
    return lines, data[start:]


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def start_http(core: EchoCore, port: int, ready_file: str | None) -> None:
    """Streamable HTTP on 127.0.0.1:PORT/mcp with one JSON response per POST, in threads."""
    import socket
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _reply(self, status: int, body: bytes, extra: str = "") -> None:
            # One write per response: headers and body in separate segments would meet
            # Nagle and delayed ACK on the client side.
            reason = self.responses.get(status, ("",))[0]
            head = f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n"
            if body:
                head += "Content-Type: application/json\r\n"
            head += extra + "\r\n"
            self.wfile.write(head.encode() + body)

        def do_POST(self) -> None:
            if self.path.split("?")[0] != "/mcp":
                self._reply(404, b"")
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            response, code = core.handle(body, self.headers)
            if response is None:
                self._reply(202, b"")
            else:
                self._reply(HTTP_STATUS.get(code, 200), response)

        def do_GET(self) -> None:
            self._reply(405, b"", "Allow: POST\r\n")

        do_DELETE = do_GET

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128

    server = Server(("127.0.0.1", port), Handler)
    url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
    if ready_file:
        with open(ready_file + ".tmp", "w") as f:
            f.write(url + "\n")
        os.replace(ready_file + ".tmp", ready_file)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser(description="MCP echo server for benchmarks")
    parser.add_argument("--tools", type=int, default=1, help="number of tools (default 1)")
    parser.add_argument("--page-size", type=int, default=100, help="tools per tools/list page")
    parser.add_argument("--sleep", type=float, default=0.0, help="seconds before answering")
    parser.add_argument("--http", type=int, metavar="PORT", help="also serve HTTP (0 = any)")
    parser.add_argument("--ready-file", help="with --http: write the URL here once listening")
    args = parser.parse_args()
    core = EchoCore(args.tools, args.page_size)
    if args.sleep > 0:
        time.sleep(args.sleep)
    if args.http is not None:
        start_http(core, args.http, args.ready_file)
    try:
        serve_stdio(core)
        if args.http is not None:
            # With HTTP on, stdin EOF (e.g. started with </dev/null) does not end the server.
            while True:
                time.sleep(3600)
    except (KeyboardInterrupt, BrokenPipeError):
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
