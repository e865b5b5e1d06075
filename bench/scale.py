"""The scale run: many slow-starting servers with many tools, then many idle agents.

50 stdio echo servers x 200 tools (10,000 tools), each sleeping 0.5 s before it answers
anything. Measured: start-up to ready, a full paged ``tools/list`` through the socket, the
daemon's RSS; then the per-call latency and RSS with and without 1,000 idle connections.
"""

from __future__ import annotations

import os
import selectors
import socket
import statistics
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from bench import procstat
from bench.targets import ECHO, PYTHON, Env, running_mcpd
from bench.wire import LineClient, request_line


@dataclass
class ScaleSettings:
    servers: int = 50
    tools: int = 200
    sleep: float = 0.5
    idle_connections: int = 1000
    list_repeats: int = 5
    latency_duration: float = 2.0


def scale_server_command(settings: ScaleSettings) -> list[str]:
    # -S and --stdlib-json: no site-packages and no msgspec, so each of the fifty servers
    # starts in ~30 ms of CPU and as much as possible of the time measured is the daemon's.
    return [
        PYTHON, "-S", ECHO, "--stdlib-json",
        "--tools", str(settings.tools), "--sleep", str(settings.sleep),
    ]  # fmt: skip


def run_scale(env: Env, settings: ScaleSettings, loadgen: Any) -> dict[str, Any]:
    """``loadgen(args, tool)`` runs the load generator (conc 1, 64 B) and returns its report."""
    command = scale_server_command(settings)
    servers = {
        f"e{i:02d}": {"command": command[0], "args": command[1:]} for i in range(settings.servers)
    }
    # Room for the idle agents; dropped (with a note) if mcpd has no such setting.
    options = {"max_connections": settings.idle_connections + 64}
    out: dict[str, Any] = {"settings": settings.__dict__.copy()}
    out["servers_alone_s"] = servers_alone(command, settings.servers, settings.tools)
    # Not pinned: starting fifty children is exactly where a second core helps the daemon.
    with running_mcpd(env, "mcpd-scale", servers, None, options, timeout=60) as daemon:
        pid = daemon.proc.pid
        out["ready_s"] = daemon.ready_s
        out["notify_ready_s"] = daemon.notify_ready_s
        out["ready_by"] = daemon.ready_by
        out["daemon_cpu_to_ready_s"] = procstat.process_cpu_seconds(pid)
        out["memory_after_ready"] = procstat.memory_kb(pid)

        out["tools_list"] = time_tools_list(daemon.socket, settings.list_repeats)
        out["memory_after_list"] = procstat.memory_kb(pid)

        tool = "mcp__e00__echo"
        before = loadgen(["--connect", str(daemon.socket), "--cpu-pid", str(pid)], tool)
        out["latency_without_idle"] = before["cells"][0]
        out["memory_before_idle"] = procstat.memory_kb(pid)

        with IdleAgents(str(daemon.socket), settings.idle_connections) as idle:
            out["idle"] = idle.summary()
            out["memory_with_idle"] = procstat.memory_kb(pid)
            during = loadgen(["--connect", str(daemon.socket), "--cpu-pid", str(pid)], tool)
            out["latency_with_idle"] = during["cells"][0]
            out["memory_with_idle_after_calls"] = procstat.memory_kb(pid)
        out["peak_memory"] = procstat.memory_kb(pid)
    return out


def servers_alone(command: list[str], count: int, tools: int) -> float | None:
    """The floor for the start-up: the same servers without mcpd, all started at once, each
    sent discover and every tools/list page up front; seconds until the last answer.

    The cursors are this echo server's (page offsets): fine for a floor, not for a client.
    """
    pages = (tools + 99) // 100
    lines = [request_line(1, "server/discover", None, modern=True)]
    lines += [
        request_line(2 + p, "tools/list", {"cursor": str(p * 100)} if p else None, modern=True)
        for p in range(pages)
    ]
    t0 = time.monotonic()
    procs = [
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        for _ in range(count)
    ]
    sel = selectors.DefaultSelector()
    try:
        for proc in procs:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(b"".join(lines))
            sel.register(proc.stdout, selectors.EVENT_READ, [0])
        waiting = count
        deadline = t0 + 30
        while waiting and time.monotonic() < deadline:
            for key, _ in sel.select(1.0):
                chunk = os.read(key.fd, 1 << 16)
                key.data[0] += chunk.count(b"\n")
                if not chunk or key.data[0] >= len(lines):
                    sel.unregister(key.fileobj)
                    waiting -= 1
        return time.monotonic() - t0 if not waiting else None
    finally:
        sel.close()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()
        for proc in procs:
            proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()


def time_tools_list(path: Any, repeats: int) -> dict[str, Any]:
    """Full paged tools/list through the socket, on one connection after the handshake."""
    client = LineClient.connect(str(path))
    try:
        client.handshake(modern=True)
        times = []
        counts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            names = client.list_tools()
            times.append((time.perf_counter() - t0) * 1e3)
            counts.append(len(names))
        pages = client.pages_listed
    finally:
        client.close()
    return {
        "first_ms": times[0],
        "median_ms": statistics.median(times),
        "all_ms": times,
        "tools": counts[-1],
        "pages": pages,
    }


class IdleAgents:
    """N connections that each complete the modern handshake and then say nothing."""

    def __init__(self, path: str, count: int) -> None:
        self.path = path
        self.count = count
        self.socks: list[socket.socket] = []
        self.answered = 0
        self.failed: list[str] = []
        self.open_s = 0.0

    def __enter__(self) -> IdleAgents:
        t0 = time.perf_counter()
        line = request_line(1, "server/discover", None, modern=True)
        for _ in range(self.count):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self._connect(s)
                s.sendall(line)
            except OSError as exc:
                self.failed.append(f"connect: {exc}")
                s.close()
                continue
            self.socks.append(s)
        self._await_replies(deadline=time.monotonic() + 30)
        self.open_s = time.perf_counter() - t0
        return self

    def _connect(self, s: socket.socket) -> None:
        """A full accept backlog makes a Unix connect fail with EAGAIN: wait and retry."""
        deadline = time.monotonic() + 10
        while True:
            try:
                s.connect(self.path)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.001)

    def _await_replies(self, deadline: float) -> None:
        sel = selectors.DefaultSelector()
        buffers: dict[socket.socket, bytes] = {}
        for s in self.socks:
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
            buffers[s] = b""
        waiting = len(self.socks)
        while waiting and time.monotonic() < deadline:
            for key, _ in sel.select(0.5):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                try:
                    chunk = s.recv(65536)
                except OSError as exc:
                    chunk = b""
                    self.failed.append(f"recv: {exc}")
                if not chunk:
                    self.failed.append("closed by mcpd before answering")
                elif b"\n" not in buffers[s] + chunk:
                    buffers[s] += chunk
                    continue
                elif b'"result"' in buffers[s] + chunk:
                    self.answered += 1
                else:
                    self.failed.append((buffers[s] + chunk)[:200].decode(errors="replace"))
                sel.unregister(s)
                waiting -= 1
        if waiting:
            self.failed.append(f"{waiting} connection(s) got no discover reply in time")
        sel.close()

    def summary(self) -> dict[str, Any]:
        return {
            "requested": self.count,
            "open": len(self.socks),
            "answered": self.answered,
            "open_s": self.open_s,
            "failures": len(self.failed),
            "first_failures": sorted(set(self.failed))[:3],
        }

    def __exit__(self, *exc: object) -> None:
        for s in self.socks:
            s.close()
        self.socks.clear()
