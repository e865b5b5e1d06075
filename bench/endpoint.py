"""Request latency through each way an agent reaches mcpd: the Unix socket's line
protocol, POST /mcp on the Unix socket, and POST /mcp on the TCP endpoint with the
bearer token (the Origin and token checks included).

    .venv/bin/python -m bench.endpoint [--calls N] [--json]

One agent, one request at a time, on one kept-alive connection each: ``tools/call`` of
the echo server's ``echo`` (64 B) in the 2026-07-28 era. Prints p50/p90/p99 in
microseconds per path; the HTTP paths parse every response's head and body as a
client must. Blocking sockets, so the client adds as little as it can.
"""

from __future__ import annotations

import argparse
import json
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

from bench.relevance import VENV_BIN, _process, _wait_ready

ROOT = Path(__file__).resolve().parent.parent
ECHO = ROOT / "bench" / "echo_server.py"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _call(rid: int) -> bytes:
    params = {"name": "mcp__echo__echo", "arguments": {"text": "x" * 64}, "_meta": META}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params},
                      separators=(",", ":")).encode()  # fmt: skip


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def until(self, mark: bytes) -> bytes:
        while mark not in self.buf:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("mcpd closed the connection")
            self.buf += chunk
        head, _, self.buf = self.buf.partition(mark)
        return head

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("mcpd closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def line_client(path: str) -> Callable[[int], bytes]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    reader = _Reader(sock)

    def call(rid: int) -> bytes:
        sock.sendall(_call(rid) + b"\n")
        return reader.until(b"\n")

    return call


def http_client(sock: socket.socket, headers: dict[str, str]) -> Callable[[int], bytes]:
    reader = _Reader(sock)
    fixed = "".join(f"{k}: {v}\r\n" for k, v in headers.items())

    def call(rid: int) -> bytes:
        body = _call(rid)
        sock.sendall(
            (
                "POST /mcp HTTP/1.1\r\nHost: mcpd\r\nContent-Type: application/json\r\n"
                "Accept: application/json, text/event-stream\r\n"
                "MCP-Protocol-Version: 2026-07-28\r\n"
                f"Mcp-Method: tools/call\r\nMcp-Name: mcp__echo__echo\r\n{fixed}"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            + body
        )
        head = reader.until(b"\r\n\r\n").decode("latin-1")
        if not head.startswith("HTTP/1.1 200"):
            raise RuntimeError(f"mcpd answered {head.splitlines()[0]!r}")
        length = next(int(line.split(":", 1)[1]) for line in head.split("\r\n")
                      if line.lower().startswith("content-length:"))  # fmt: skip
        return reader.exactly(length)

    return call


def measure(call: Callable[[int], bytes], calls: int) -> dict[str, float]:
    for rid in range(50):  # warm up: first connections, caches, the echo server's start
        call(rid)
    took = []
    for rid in range(calls):
        t0 = time.perf_counter()
        reply = call(rid)
        took.append((time.perf_counter() - t0) * 1e6)
        if b'"x' not in reply:
            raise RuntimeError(f"unexpected reply: {reply[:200]!r}")
    took.sort()
    return {
        "p50_us": round(statistics.median(took), 1),
        "p90_us": round(took[int(len(took) * 0.9)], 1),
        "p99_us": round(took[int(len(took) * 0.99)], 1),
        "calls": calls,
    }


def run_endpoint(mcpd: list[str] | None = None, calls: int = 2000) -> dict[str, Any]:
    mcpd = mcpd or [str(VENV_BIN / "mcpd")]
    with tempfile.TemporaryDirectory(prefix="mcpd-endpoint-", dir="/tmp") as tmp:
        work = Path(tmp)
        sock = str(work / "mcpd.sock")
        config = work / "mcpd.toml"
        config.write_text(
            f'[daemon]\nsocket = "{sock}"\nstate_dir = "{work / "state"}"\n'
            'http_listen = "127.0.0.1:0"\n'
            f"[servers.echo]\ncommand = {json.dumps(sys.executable)}\n"
            f"args = [{json.dumps(str(ECHO))}]\n"
        )
        log = (work / "mcpd.log").open("wb")
        serve = [*mcpd, "serve", "--config", str(config), "--log", "stderr"]
        with _process(serve, cwd=ROOT, stdout=log, stderr=log) as daemon:
            status = _wait_ready(sock, daemon, 60.0)
            url = status["daemon"]["http"]
            port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
            token = subprocess.run([*mcpd, "token", "--config", str(config)], check=True,
                                   capture_output=True, text=True).stdout.strip()  # fmt: skip
            unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            unix.connect(sock)
            tcp = socket.create_connection(("127.0.0.1", port))
            tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            paths = {
                "socket, line protocol": line_client(sock),
                "socket, POST /mcp": http_client(unix, {}),
                "TCP endpoint, POST /mcp + token": http_client(
                    tcp, {"Authorization": f"Bearer {token}", "Origin": f"http://127.0.0.1:{port}"}
                ),
            }
            return {name: measure(call, calls) for name, call in paths.items()}


def render(result: dict[str, Any]) -> list[str]:
    lines = [f"  {'path':<34} {'p50 us':>8} {'p90 us':>8} {'p99 us':>8}"]
    for name, r in result.items():
        lines.append(f"  {name:<34} {r['p50_us']:>8} {r['p90_us']:>8} {r['p99_us']:>8}")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--mcpd", help="the mcpd command (default: this venv's mcpd)")
    args = parser.parse_args(argv)
    result = run_endpoint(args.mcpd.split() if args.mcpd else None, args.calls)
    print(json.dumps(result, indent=2) if args.json else "\n".join(render(result)))


if __name__ == "__main__":
    main()
