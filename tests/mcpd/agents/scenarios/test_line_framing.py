"""Every message mcpd writes is exactly one line of JSON, whatever its servers send.

HTTP bodies and event streams are not line-framed, and real servers pretty-print
their JSON or split an event's JSON over many ``data:`` lines. Before, those raw
newlines reached the agent socket inside results and tool schemas, and every agent
lost every server's tools at once. These tests put such servers (and a steady stdio
one) behind a real daemon and read what agents get byte by byte.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.clients.agent import META, make_config, running
from tests.support.http_servers.serving import Responder, SeenRequest, serve_http
from tests.support.system.procs import scripted

MODERN = "2026-07-28"
# Strings whose contents must reach the agent exactly as the server meant them.
TRICKY = 'line\u2028sep\u2029para, an escaped\nnewline, a tab\t, a \r return, "quotes" \\ é 😀'


def pretty(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False)


def crlf_sse(obj: Any) -> bytes:
    """One event whose JSON spans many ``data:`` lines, with CRLF line endings."""
    lines = pretty(obj).split("\n")
    return ("event: message\r\n" + "".join(f"data: {x}\r\n" for x in lines) + "\r\n").encode()


def tool_def(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"Echoes its text.\nSecond line of the description: {TRICKY}",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "what to echo"}},
            "required": ["text"],
        },
    }


def call_result(text: str) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"echo": text, "nested": {"list": [1, 2.5, None, True]}},
        "isError": False,
    }


class FormattingServer:
    """A modern (2026-07-28) MCP server over HTTP that formats every reply its way:
    ``pretty`` answers with indented JSON bodies, ``split`` with an event stream
    whose JSON is spread over data lines (and sends progress first, as split)."""

    def __init__(self, style: str, tools: list[str]) -> None:
        self.style = style
        self.tools = tools
        self.calls: list[Any] = []

    async def __call__(self, req: SeenRequest, respond: Responder) -> None:
        msg = req.message
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if rid is None:
            await respond.reply(202)
            return
        if method == "server/discover":
            value: dict[str, Any] = {
                "resultType": "complete",
                "supportedVersions": [MODERN],
                "capabilities": {"tools": {}},
                "ttlMs": 0,
                "cacheScope": "public",
            }
        elif method == "tools/list":
            value = {"resultType": "complete", "tools": [tool_def(t) for t in self.tools]}
        elif method == "tools/call":
            self.calls.append(params.get("arguments"))
            value = {"resultType": "complete", **call_result(params["arguments"]["text"])}
        else:
            reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}}
            await respond.reply(404, pretty(reply), [("Content-Type", "application/json")])
            return
        reply = {"jsonrpc": "2.0", "id": rid, "result": value}
        if self.style == "pretty":
            await respond.reply(200, pretty(reply), [("Content-Type", "application/json")])
            return
        events = []
        token = (params.get("_meta") or {}).get("progressToken")
        if token is not None:
            progress = {"progressToken": token, "progress": 1, "total": 2, "message": TRICKY}
            note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": progress}
            events.append(crlf_sse(note))
        events.append(crlf_sse(reply))
        await respond.sse(*events)


class LineAgent:
    """A modern agent that keeps every raw line the daemon writes to it."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.lines: list[bytes] = []
        self._buf = b""
        self._next = 0

    async def ask(self, rid: int, method: str, params: dict[str, Any]) -> list[bytes]:
        """Send a request; the raw lines up to and including the one that answers it."""
        meta = {**META, **params.get("_meta", {})}
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta}}
        await self.stream.send_all(json.dumps(body).encode() + b"\n")
        got: list[bytes] = []
        while True:
            while b"\n" not in self._buf:
                data = await self.stream.receive_some(1 << 16)
                assert data, "the daemon closed the connection"
                self._buf += data
            line, _, self._buf = self._buf.partition(b"\n")
            self.lines.append(line)
            got.append(line)
            # Every single line on its own is a whole JSON-RPC message.
            msg = json.loads(line)
            if msg.get("id") == rid:
                return got


async def agent_session(path: str, names: list[str], out: dict[int, Any], n: int) -> None:
    stream = await trio.open_unix_socket(path)
    async with stream:
        agent = LineAgent(stream)
        listed = await agent.ask(1, "tools/list", {})
        assert len(listed) == 1
        tools = json.loads(listed[0])["result"]["tools"]
        results = {}
        for i, name in enumerate(names, start=2):
            params = {"name": name, "arguments": {"text": f"{TRICKY} #{n}"}}
            if "split" in name:
                params["_meta"] = {**META, "progressToken": f"p{i}"}
            lines = await agent.ask(i, "tools/call", params)
            results[name] = [json.loads(x) for x in lines]
        out[n] = {"tools": tools, "results": results, "lines": agent.lines}


async def test_pretty_and_split_servers_reach_three_agents_as_one_line_each(
    tmp_path: Path,
) -> None:
    pretty_server = FormattingServer("pretty", ["echo_pretty"])
    split_server = FormattingServer("split", ["echo_split"])
    steady_cmd, steady_args = scripted("--tools", "2")
    async with (
        serve_http(pretty_server) as http_pretty,
        serve_http(split_server) as http_split,
    ):
        servers = {
            "pretty": {"url": http_pretty.url()},
            "split": {"url": http_split.url()},
            "steady": {"command": steady_cmd, "args": list(steady_args)},
        }
        cfg = make_config(tmp_path, servers)
        names = ["mcp__pretty__echo_pretty", "mcp__split__echo_split", "mcp__steady__tool0"]
        out: dict[int, Any] = {}
        with trio.fail_after(40):
            async with running(cfg) as daemon, trio.open_nursery() as nursery:
                for n in range(3):
                    nursery.start_soon(agent_session, daemon.socket_path, names, out, n)
    assert sorted(out) == [0, 1, 2]
    for n, seen in out.items():
        for line in seen["lines"]:
            assert b"\n" not in line and b"\r" not in line
        by_name = {t["name"]: t for t in seen["tools"]}
        # The other servers' tools are all there, next to the formatting servers'.
        assert set(names) <= set(by_name)
        assert "mcp__steady__tool1" in by_name
        for local in ("mcp__pretty__echo_pretty", "mcp__split__echo_split"):
            meant = tool_def(local.rsplit("__", 1)[1])
            assert by_name[local]["inputSchema"] == meant["inputSchema"]
            # Its line and paragraph separators and its lone CR reach a model as line
            # feeds (the registry cleans what servers write); the rest as it was.
            said = meant["description"].replace("\u2028", "\n").replace("\u2029", "\n")
            assert by_name[local]["description"].endswith(said.replace("\r", "\n"))
        for local in ("mcp__pretty__echo_pretty", "mcp__split__echo_split"):
            *notes, reply = seen["results"][local]
            result = reply["result"]
            assert result["content"] == call_result(f"{TRICKY} #{n}")["content"]
            assert result["structuredContent"] == call_result(f"{TRICKY} #{n}")["structuredContent"]
            assert result["isError"] is False
            if "split" in local:
                assert [x["method"] for x in notes] == ["notifications/progress"]
                # A progress message reaches a model cleaned, as a description does.
                message = TRICKY.replace("\u2028", "\n").replace("\u2029", "\n")
                assert notes[0]["params"]["message"] == message.replace("\r", "\n")
        steady = seen["results"]["mcp__steady__tool0"][-1]["result"]
        assert steady["content"][0]["text"] == f"tool0:{TRICKY} #{n}"
    # What the servers were sent arrived intact too (the agent's strings, unchanged).
    assert sorted(c["text"] for c in pretty_server.calls) == [f"{TRICKY} #{n}" for n in range(3)]
    assert sorted(c["text"] for c in split_server.calls) == [f"{TRICKY} #{n}" for n in range(3)]


# -- property: arbitrarily formatted JSON from a server, one line per message to the agent --

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",))),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
WHITESPACE = [" ", "\t", "\n", "\r\n", "\r", "\n  ", "\r\n\t"]


def formatted(obj: Any, rng: random.Random) -> str:
    """``obj`` as JSON with random insignificant whitespace (line breaks included)
    around every token, and random escaping of non-ASCII."""

    def ws() -> str:
        return "".join(rng.choice(WHITESPACE) for _ in range(rng.randint(0, 2)))

    def enc(v: Any) -> str:
        if isinstance(v, dict):
            items = [
                f"{ws()}{json.dumps(k, ensure_ascii=rng.random() < 0.5)}{ws()}:{ws()}{enc(x)}"
                for k, x in v.items()
            ]
            return "{" + ",".join(items) + ws() + "}"
        if isinstance(v, list):
            return "[" + ",".join(ws() + enc(x) for x in v) + ws() + "]"
        return json.dumps(v, ensure_ascii=rng.random() < 0.5)

    return ws() + enc(obj) + ws()


class _Quirky(BaseHTTPRequestHandler):
    """A modern MCP server whose tools/call answer is whatever the test put in
    ``reply``: a body (JSON) or an event stream, formatted the test's way."""

    protocol_version = "HTTP/1.1"
    reply: tuple[str, bytes] = ("application/json", b"")

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "id" not in body:
            self._send(202, "application/json", b"")
            return
        if body["method"] == "tools/call":
            kind, data = type(self).reply
            self._send(200, kind, data.replace(b'"ID"', json.dumps(body["id"]).encode(), 1))
            return
        if body["method"] == "server/discover":
            value: dict[str, Any] = {
                "resultType": "complete",
                "supportedVersions": [MODERN],
                "capabilities": {"tools": {}},
                "ttlMs": 0,
                "cacheScope": "public",
            }
        else:
            schema = {"type": "object", "properties": {}}
            value = {"resultType": "complete", "tools": [{"name": "t", "inputSchema": schema}]}
        self._send(
            200,
            "application/json",
            json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": value}, indent=1).encode(),
        )

    def _send(self, status: int, kind: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def quirky_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """mcpd as its own process, with the quirky server as its only upstream."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Quirky)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    tmp = tmp_path_factory.mktemp("quirky")
    sock = str(tmp / "mcpd.sock")
    config = tmp / "mcpd.toml"
    config.write_text(
        f'[daemon]\nsocket = "{sock}"\nhealth_interval = 0\n'
        f'[servers.quirky]\nurl = "http://127.0.0.1:{httpd.server_address[1]}/mcp"\n'
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpd", "serve", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not Path(sock).exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "mcpd did not start"
            time.sleep(0.05)
        yield sock
    finally:
        proc.terminate()
        proc.wait(10)
        httpd.shutdown()
        if proc.stderr is not None:
            proc.stderr.close()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    text=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",))),
    extra=json_values,
    seed=st.integers(0, 2**32),
    as_stream=st.booleans(),
)
def test_any_formatting_reaches_the_agent_as_one_line(
    quirky_daemon: str, text: str, extra: Any, seed: int, as_stream: bool
) -> None:
    rng = random.Random(seed)
    meant = {"content": [{"type": "text", "text": text}], "structuredContent": {"x": extra}}
    message = {"jsonrpc": "2.0", "id": "ID", "result": {"resultType": "complete", **meant}}
    doc = formatted(message, rng)
    if as_stream:
        eol = rng.choice(["\n", "\r\n", "\r"])
        # Split at the formatter's own line breaks: a server may break its data lines
        # anywhere JSON allows whitespace.
        parts = doc.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        event = "".join(f"data: {p}{eol}" for p in parts) + eol
        _Quirky.reply = ("text/event-stream", event.encode())
    else:
        _Quirky.reply = ("application/json", doc.encode())
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(quirky_daemon)
        req = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "mcp__quirky__t", "arguments": {}, "_meta": META},
        }
        s.sendall(json.dumps(req).encode() + b"\n")
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(1 << 16)
            assert chunk
            buf += chunk
        line, _, rest = buf.partition(b"\n")
        assert rest == b""
    reply = json.loads(line)
    assert reply["id"] == 7
    assert reply["result"]["content"] == meant["content"]
    assert reply["result"]["structuredContent"] == meant["structuredContent"]


async def test_a_broken_line_is_never_written_and_its_request_gets_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from types import SimpleNamespace

    from mcpd.agents.agent_server import new_session
    from mcpd.agents.connection.agent_connection import Connection
    from mcpd.agents.entry.unfinished import UnfinishedLines
    from mcpd.config.tables.model import DaemonConfig
    from mcpd.daemon import _LINES

    handler = SimpleNamespace(router=SimpleNamespace(splice=True, replies=None))
    a, b = trio.socket.socketpair()
    ours, theirs = trio.SocketStream(a), trio.SocketStream(b)
    hold = UnfinishedLines(DaemonConfig).hold(None)
    conn = Connection(
        handler,  # type: ignore[arg-type]
        ours,
        new_session(),
        _LINES,
        DaemonConfig(),
        version=0,
        profile=None,  # type: ignore[arg-type]
        line_hold=hold,
    )
    await conn.send(b'{"jsonrpc":"2.0","id":5,"result":{"text":"a\nb"}}', 5)
    conn.send_nowait(b'{"jsonrpc":"2.0","method":"x"')
    with trio.fail_after(5):
        data = b""
        while not data.endswith(b"\n"):
            data += await theirs.receive_some(4096)
    reply = json.loads(data)
    assert reply["id"] == 5
    assert reply["error"]["code"] == -32603
    assert "raw line break" in reply["error"]["message"]
    assert caplog.text.count("did not send a message") == 2
    assert "a fault in mcpd" in caplog.text
    await ours.aclose()
    await theirs.aclose()
