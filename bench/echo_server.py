"""A fast MCP echo server for the benchmarks: stdio, and optionally Streamable HTTP.

It speaks both protocol eras. A request whose ``params._meta`` carries
``io.modelcontextprotocol/protocolVersion`` is served as 2026-07-28 (the envelope is checked,
results carry ``resultType``); anything else is served the legacy way (``initialize``,
``notifications/initialized``, ``ping``, results without ``resultType``).

Tools: ``echo`` returns its ``text`` argument as one text block; ``--tools N`` adds
``tool_0001`` ... so the server exposes N tools (all echo), listed in pages of ``--page-size``.

Only the standard library and msgspec are imported (``http_echo`` only with ``--http``;
``--stdlib-json`` skips msgspec too, so that fifty of these start quickly).

    python bench/echo_server.py [--tools N] [--page-size P] [--sleep S]
                                [--http PORT [--ready-file PATH] [--sse]] [--stdlib-json]

    --tools N          expose N tools (default 1)
    --page-size P      tools per tools/list page (default 100)
    --sleep S          sleep S seconds before answering anything (models a slow start)
    --http PORT        also serve Streamable HTTP on 127.0.0.1:PORT/mcp (0 = any port)
    --ready-file PATH  with --http: write the URL to PATH once listening
    --sse              with --http: answer each request with an event stream of one event
    --stdlib-json      use the json module instead of msgspec
"""

from __future__ import annotations

import os
import sys
import time

# Neither typing nor argparse is imported at run time: together they are a third of this
# server's start-up, which the scale run pays fifty times.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

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


class RPCError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class Codec:
    """msgspec when it can be imported, else the json module (``--stdlib-json``).

    Importing msgspec costs a Python process about 45 ms of CPU; the scale run starts fifty
    servers on two cores, where that alone would dominate the daemon's start-up time.
    """

    def __init__(self, stdlib: bool) -> None:
        self.decode: Callable[[bytes], Any]
        self.encode: Callable[[Any], bytes]
        if not stdlib:
            try:
                import msgspec
            except ImportError:
                stdlib = True
        if stdlib:
            import json

            self.decode = json.loads
            self.encode = lambda obj: json.dumps(obj, separators=(",", ":")).encode()
            self.errors: tuple[type[Exception], ...] = (ValueError,)
        else:
            self.decode = msgspec.json.decode
            self.encode = msgspec.json.Encoder().encode
            self.errors = (msgspec.DecodeError,)
        self.name = "json" if stdlib else "msgspec"


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

    def __init__(self, codec: Codec, tool_count: int, page_size: int) -> None:
        self.codec = codec
        self.tools = make_tools(max(1, tool_count))
        self.tool_names = frozenset(t["name"] for t in self.tools)
        self.page_size = max(1, page_size)
        # Pages never change: each is encoded once per era and spliced into the response.
        self.pages: dict[tuple[bool, int], bytes] = {}

    def handle(self, line: bytes, http_headers: Any = None) -> tuple[bytes | None, int]:
        """(response line without newline, or None for a notification; JSON-RPC error code)."""
        try:
            msg = self.codec.decode(line)
        except self.codec.errors as exc:
            return self._error(None, RPCError(PARSE_ERROR, f"Parse error: {exc}")), PARSE_ERROR
        if not isinstance(msg, dict):
            return self._error(None, RPCError(INVALID_REQUEST, "Invalid request")), INVALID_REQUEST
        msg_id = msg.get("id")
        if "method" not in msg or msg_id is None:
            # A notification (notifications/initialized, notifications/cancelled), or a
            # response, although this server never sends requests.
            return None, 0
        try:
            result = self._dispatch(msg, http_headers)
        except RPCError as exc:
            return self._error(msg_id, exc), exc.code
        encode = self.codec.encode
        if isinstance(result, bytes):  # a pre-encoded tools/list page
            head = encode({"jsonrpc": "2.0", "id": msg_id})[:-1]
            return head + b',"result":' + result + b"}", 0
        return encode({"jsonrpc": "2.0", "id": msg_id, "result": result}), 0

    def _error(self, msg_id: Any, exc: RPCError) -> bytes:
        error: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            error["data"] = exc.data
        return self.codec.encode({"jsonrpc": "2.0", "id": msg_id, "error": error})

    def _dispatch(self, msg: dict[str, Any], headers: Any) -> Any:
        method = msg["method"]
        params = msg.get("params")
        if params is None:
            params = {}
        elif not isinstance(params, dict):
            raise RPCError(INVALID_PARAMS, "params must be an object")
        meta = params.get("_meta")
        modern = isinstance(meta, dict) and KEY_VERSION in meta
        if method == "initialize":
            asked = params.get("protocolVersion")
            return {
                "protocolVersion": asked if asked in LEGACY else LEGACY[0],
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": SERVER_INFO,
            }
        if method == "ping":
            return {}
        if modern:
            self._check_envelope(method, params, meta, headers)
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

    def _check_envelope(self, method: str, params: dict[str, Any], meta: Any, headers: Any) -> None:
        # meta is a dict holding KEY_VERSION, as the caller's ``modern`` says; a type checker
        # cannot follow that, and checking again would cost every modern request.
        if not isinstance(meta.get(KEY_CAPS), dict):
            raise RPCError(INVALID_PARAMS, f"params._meta is missing {KEY_CAPS}")
        version = meta[KEY_VERSION]
        if version != MODERN:
            raise RPCError(
                UNSUPPORTED_VERSION,
                "Unsupported protocol version",
                {"supported": [MODERN], "requested": version},
            )
        if headers is None:
            return
        # Streamable HTTP 2026-07-28: the routing headers must mirror the body.
        if headers.get("MCP-Protocol-Version") != version:
            raise RPCError(HEADER_MISMATCH, "Header mismatch: MCP-Protocol-Version")
        if headers.get("Mcp-Method") != method:
            raise RPCError(HEADER_MISMATCH, "Header mismatch: Mcp-Method")
        if method == "tools/call" and headers.get("Mcp-Name") != params.get("name"):
            raise RPCError(HEADER_MISMATCH, "Header mismatch: Mcp-Name")

    def _call(self, params: dict[str, Any], modern: bool) -> dict[str, Any]:
        name = params.get("name")
        if name not in self.tool_names:
            raise RPCError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = params.get("arguments")
        text = arguments.get("text") if isinstance(arguments, dict) else None
        if not isinstance(text, str):
            raise RPCError(INVALID_PARAMS, "arguments.text must be a string")
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
        if modern:
            result["resultType"] = "complete"
            result["_meta"] = RESULT_META
        return result

    def _list(self, params: dict[str, Any], modern: bool) -> bytes:
        cursor = params.get("cursor")
        if cursor is None:
            start = 0
        else:
            start = int(cursor) if isinstance(cursor, str) and cursor.isdigit() else -1
            if start < 0 or start >= len(self.tools) or start % self.page_size:
                raise RPCError(INVALID_PARAMS, f"invalid cursor: {cursor!r}")
        page = self.pages.get((modern, start))
        if page is None:
            end = start + self.page_size
            result: dict[str, Any] = {"tools": self.tools[start:end]}
            if end < len(self.tools):
                result["nextCursor"] = str(end)
            if modern:
                result["resultType"] = "complete"
                result["ttlMs"] = 0
                result["cacheScope"] = "public"
                result["_meta"] = RESULT_META
            page = self.pages[(modern, start)] = self.codec.encode(result)
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


def start_http(core: EchoCore, port: int, ready_file: str | None, sse: bool) -> None:
    """Streamable HTTP on 127.0.0.1:PORT/mcp, in a thread (``bench/http_echo.py``)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bench.http_echo import start_in_thread

    start_in_thread(core, port, ready_file, sse)


OPTIONS = {
    "--tools": ("tools", int, 1),
    "--page-size": ("page_size", int, 100),
    "--sleep": ("sleep", float, 0.0),
    "--http": ("http", int, None),
    "--ready-file": ("ready_file", str, None),
}
FLAGS = {"--stdlib-json": "stdlib_json", "--sse": "sse"}


def parse_args(argv: list[str]) -> dict[str, Any]:
    args: dict[str, Any] = {name: default for name, _, default in OPTIONS.values()}
    args.update(dict.fromkeys(FLAGS.values(), False))
    items = iter(argv)
    for item in items:
        key, eq, inline = item.partition("=")
        if item in ("-h", "--help"):
            print(__doc__)
            sys.exit(0)
        elif item in FLAGS:
            args[FLAGS[item]] = True
        elif key in OPTIONS:
            name, kind, _ = OPTIONS[key]
            value = inline if eq else next(items, None)
            try:
                args[name] = kind(value)
            except (TypeError, ValueError):
                sys.exit(f"echo_server: {key} needs a value of type {kind.__name__}")
        else:
            sys.exit(f"echo_server: unknown argument {item!r} (see --help)")
    return args


def main() -> None:
    args = parse_args(sys.argv[1:])
    core = EchoCore(Codec(args["stdlib_json"]), args["tools"], args["page_size"])
    if args["sleep"] > 0:
        time.sleep(args["sleep"])
    if args["http"] is not None:
        start_http(core, args["http"], args["ready_file"], args["sse"])
    try:
        serve_stdio(core)
        if args["http"] is not None:
            # With HTTP on, stdin EOF (e.g. started with </dev/null) does not end the server.
            while True:
                time.sleep(3600)
    except (KeyboardInterrupt, BrokenPipeError):
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
