"""The status page under the scale run's load: 50 echo servers of 200 tools each
(10,000 tools), every server with calls in its last hour.

    .venv/bin/python -m bench.page [--requests N] [--json]

Measures ``GET /`` as a browser with a session gets it on the TCP endpoint (and as
``curl`` gets it on the socket): the time to the whole page, p50/p90/p99 in
milliseconds over one kept-alive connection, and its size. Then the call path:
``tools/call`` latency on the socket's line protocol with no page open, and with
live pages open (each holding the page's event stream), interleaved, so that a cost
of the page where nobody looks at it would show. Targets: p50 under 50 ms, under
150 KB.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.endpoint import META, _Reader
from bench.relevance import VENV_BIN, _process, _wait_ready
from bench.report import Verdict
from bench.scale import echo_servers

ROOT = Path(__file__).resolve().parent.parent
SERVERS = 50
TOOLS = 200
TARGET_MS = 50.0
TARGET_KB = 150.0
LIVE_PAGES = 4


def _get(reader: _Reader, sock: socket.socket, path: str, headers: dict[str, str]) -> bytes:
    fixed = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall(f"GET {path} HTTP/1.1\r\n{fixed}\r\n".encode())
    head = reader.until(b"\r\n\r\n").decode("latin-1")
    if not head.startswith("HTTP/1.1 200"):
        raise RuntimeError(f"mcpd answered {head.splitlines()[0]!r} for GET {path}")
    length = next(int(line.split(":", 1)[1]) for line in head.split("\r\n")
                  if line.lower().startswith("content-length:"))  # fmt: skip
    return reader.exactly(length)


def _timed(get: Callable[[], bytes], requests: int) -> dict[str, float]:
    for _ in range(10):
        get()
    took = []
    size = 0
    for _ in range(requests):
        t0 = time.perf_counter()
        size = len(get())
        took.append((time.perf_counter() - t0) * 1e3)
    took.sort()
    return {
        "p50_ms": round(statistics.median(took), 2),
        "p90_ms": round(took[int(len(took) * 0.9)], 2),
        "p99_ms": round(took[int(len(took) * 0.99)], 2),
        "bytes": size,
        "requests": requests,
    }


def _session(mcpd: list[str], sock: str, port: int) -> str:
    """A session cookie, the way a browser gets one from ``mcpd dashboard``."""
    out = subprocess.run([*mcpd, "dashboard", "--no-browser", "--socket", sock],
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    found = re.search(r"http://127\.0\.0\.1:\d+(/\?code=\S+)", out)
    if found is None:
        raise RuntimeError(f"mcpd dashboard printed no address: {out!r}")
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(f"GET {found.group(1)} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        head = _Reader(s).until(b"\r\n\r\n").decode("latin-1")
    cookie = next((line.split(":", 1)[1].strip() for line in head.split("\r\n")
                   if line.lower().startswith("set-cookie:")), None)  # fmt: skip
    if cookie is None:
        raise RuntimeError(f"the code was not taken: {head.splitlines()[0]!r}")
    return cookie.split(";", 1)[0]


def _live_page(port: int, cookie: str) -> socket.socket:
    """A browser tab left open on the page: its event stream, read once."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(
        f"GET /page/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {cookie}\r\n"
        "Accept: text/event-stream\r\n\r\n".encode()
    )
    _Reader(s).until(b"\n\n")  # its head and first event
    return s


class _LineAgent:
    """One agent on the socket's line protocol, one call at a time."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.reader = _Reader(self.sock)
        self.rid = 0

    def echo(self, alias: str) -> bytes:
        self.rid += 1
        params = {"name": f"mcp__{alias}__echo", "arguments": {"text": "x" * 64}, "_meta": META}
        line = {"jsonrpc": "2.0", "id": self.rid, "method": "tools/call", "params": params}
        self.sock.sendall(json.dumps(line, separators=(",", ":")).encode() + b"\n")
        reply = self.reader.until(b"\n")
        if b'"x' not in reply:
            raise RuntimeError(f"unexpected reply: {reply[:200]!r}")
        return reply


def _calls(agent: _LineAgent, calls: int) -> float:
    took = []
    for _ in range(calls):
        t0 = time.perf_counter()
        agent.echo("e00")
        took.append((time.perf_counter() - t0) * 1e6)
    return round(statistics.median(took), 1)


def run_page(mcpd: list[str] | None = None, requests: int = 200) -> dict[str, Any]:
    mcpd = mcpd or [str(VENV_BIN / "mcpd")]
    servers = echo_servers(SERVERS, TOOLS)
    with tempfile.TemporaryDirectory(prefix="mcpd-page-", dir="/tmp") as tmp:
        work = Path(tmp)
        sock = str(work / "mcpd.sock")
        lines = [f'[daemon]\nsocket = "{sock}"\nstate_dir = "{work / "state"}"',
                 'http_listen = "127.0.0.1:0"']  # fmt: skip
        for alias, s in servers.items():
            lines.append(f"[servers.{alias}]\ncommand = {json.dumps(s['command'])}")
            lines.append(f"args = {json.dumps(s['args'])}")
        config = work / "mcpd.toml"
        config.write_text("\n".join(lines) + "\n")
        log = (work / "mcpd.log").open("wb")
        serve = [*mcpd, "serve", "--config", str(config), "--log", "stderr"]
        with _process(serve, cwd=ROOT, stdout=log, stderr=log) as daemon:
            status = _wait_ready(sock, daemon, 120.0)
            port = int(status["daemon"]["http"].rsplit(":", 1)[1].split("/", 1)[0])
            tools = status["daemon"]["tools"]
            agent = _LineAgent(sock)
            # Every server has calls in its last hour: each row draws its latency line.
            for alias in servers:
                for _ in range(5):
                    agent.echo(alias)
            cookie = _session(mcpd, sock, port)
            tcp = socket.create_connection(("127.0.0.1", port))
            tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tcp_reader = _Reader(tcp)
            browser = {"Host": f"127.0.0.1:{port}", "Cookie": cookie}
            unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            unix.connect(sock)
            unix_reader = _Reader(unix)
            out: dict[str, Any] = {"servers": SERVERS, "tools": tools}
            out["endpoint"] = _timed(lambda: _get(tcp_reader, tcp, "/", browser), requests)
            out["socket"] = _timed(lambda: _get(unix_reader, unix, "/", {"Host": "mcpd"}), requests)
            # The call path, without and with pages open, interleaved over rounds.
            base = []
            watched = []
            for _ in range(5):
                base.append(_calls(agent, 400))
                pages = [_live_page(port, cookie) for _ in range(LIVE_PAGES)]
                watched.append(_calls(agent, 400))
                for p in pages:
                    p.close()
            out["call_p50_us"] = {
                "no page": statistics.median(base),
                f"{LIVE_PAGES} live pages": statistics.median(watched),
            }
            return out


def render(result: dict[str, Any]) -> list[str]:
    lines = [
        f"  {result['servers']} servers, {result['tools']} tools",
        f"  {'GET /':<30} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'KB':>8}",
    ]
    for name in ("endpoint", "socket"):
        r = result[name]
        where = "TCP endpoint, session" if name == "endpoint" else "socket, read-only"
        lines.append(
            f"  {where:<30} {r['p50_ms']:>8} {r['p90_ms']:>8} {r['p99_ms']:>8} "
            f"{r['bytes'] / 1024:>8.1f}"
        )
    for name, value in result["call_p50_us"].items():
        lines.append(f"  tools/call p50, {name:<15} {value:>8} us")
    return lines


def page_run(mcpd: list[str] | None, quick: bool) -> dict[str, Any]:
    print(f"\nthe status page: GET / with {SERVERS} servers and {SERVERS * TOOLS:,} tools")
    try:
        return run_page(mcpd, requests=50 if quick else 200)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"  SKIPPED: {exc}")
        return {"skipped": str(exc)}


def verdicts(result: dict[str, Any] | None) -> list[Verdict]:
    speed = f"status page: GET / p50, {SERVERS} servers, {SERVERS * TOOLS:,} tools"
    size = "status page: its size, the same"
    if not result or "skipped" in result:
        why = (result or {}).get("skipped", "page run not run").splitlines()[0]
        return [
            Verdict(speed, "-", "-", None, f"<= {TARGET_MS:g} ms", None, why),
            Verdict(size, "-", "-", None, f"<= {TARGET_KB:g} KB", None, why),
        ]
    ms, kb = result["endpoint"]["p50_ms"], result["endpoint"]["bytes"] / 1024
    return [
        Verdict(speed, f"{ms:g} ms", "-", None, f"<= {TARGET_MS:g} ms", ms <= TARGET_MS,
                numbers=(ms, None, "ms")),
        Verdict(size, f"{kb:.1f} KB", "-", None, f"<= {TARGET_KB:g} KB", kb <= TARGET_KB,
                numbers=(kb, None, "KB")),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--mcpd", help="the mcpd command (default: this venv's mcpd)")
    args = parser.parse_args(argv)
    result = run_page(args.mcpd.split() if args.mcpd else None, args.requests)
    print(json.dumps(result, indent=2) if args.json else "\n".join(render(result)))


if __name__ == "__main__":
    main()
