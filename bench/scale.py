"""The scale run: many slow-starting servers with many tools, then many idle agents.

50 stdio echo servers x 200 tools (10,000 tools), each sleeping 0.5 s before it answers
anything. The start-up is timed against its floor, the same servers started by a minimal
launcher without mcpd (``bench/launcher.py``), in interleaved rounds: floor, mcpd, floor,
mcpd, ... The last round's daemon goes on: a full paged ``tools/list`` through the socket,
the daemon's RSS, then the per-call latency and RSS with and without 1,000 idle agents.
"""

from __future__ import annotations

import selectors
import socket
import statistics
import time
from dataclasses import dataclass
from typing import Any

from bench import procstat
from bench.hosts import Sessions, server_spec
from bench.targets import ECHO, PYTHON, Daemon, Env, running_mcpd
from bench.wire import CLIENT_INFO, LEGACY, LineClient, encode, request_line

INITIALIZED = encode({"jsonrpc": "2.0", "method": "notifications/initialized"}) + b"\n"


@dataclass
class ScaleSettings:
    servers: int = 50
    tools: int = 200
    sleep: float = 0.5
    idle_connections: int = 1000
    list_repeats: int = 5
    latency_duration: float = 2.0
    startup_rounds: int = 5


def scale_server_command(tools: int, sleep: float) -> list[str]:
    # -S and --stdlib-json: no site-packages and no msgspec, so each of the fifty servers
    # starts in ~30 ms of CPU and as much as possible of the time measured is the daemon's.
    return [PYTHON, "-S", ECHO, "--stdlib-json", "--tools", str(tools), "--sleep", str(sleep)]


def echo_servers(count: int, tools: int, sleep: float = 0.0) -> dict[str, dict[str, Any]]:
    """``count`` echo servers of ``tools`` tools each, as [servers.eNN] tables."""
    command = scale_server_command(tools, sleep)
    width = len(str(count - 1))
    return {f"e{i:0{width}d}": {"command": command[0], "args": command[1:]} for i in range(count)}


def run_scale(env: Env, settings: ScaleSettings, loadgen: Any) -> dict[str, Any]:
    """``loadgen(args, tool)`` runs the load generator (conc 1, 64 B) and returns its report."""
    command = scale_server_command(settings.tools, settings.sleep)
    servers = echo_servers(settings.servers, settings.tools, settings.sleep)
    # Room for the idle agents; dropped (with a note) if mcpd has no such setting.
    options = {"max_connections": settings.idle_connections + 64}
    out: dict[str, Any] = {"settings": settings.__dict__.copy()}
    startup: dict[str, list[Any]] = {
        "floor_s": [], "launcher_cpu_s": [], "mcpd_s": [], "daemon_cpu_to_ready_s": [],
        "ready_by": [], "notify_ready_s": [],
    }  # fmt: skip
    out["startup"] = startup
    rounds = max(1, settings.startup_rounds)
    for r in range(rounds):
        # The floor: the same servers, the same clock, nothing of mcpd.
        with Sessions(
            env.workdir, env.logdir, "scale-floor", [server_spec(command)], copies=settings.servers
        ) as floor:
            startup["floor_s"].append(floor.ready_s)
            startup["launcher_cpu_s"].append(floor.launcher_cpu_s)
            listed = sum(floor.tools())
        expected = settings.servers * settings.tools
        if listed != expected:
            env.notes.append(f"scale floor listed {listed} tools, not {expected}")
        # Not pinned: starting fifty children is exactly where a second core helps the daemon.
        with running_mcpd(env, "mcpd-scale", servers, None, options, timeout=60) as daemon:
            startup["mcpd_s"].append(daemon.ready_s)
            startup["notify_ready_s"].append(daemon.notify_ready_s)
            startup["ready_by"].append(daemon.ready_by)
            startup["daemon_cpu_to_ready_s"].append(procstat.process_cpu_seconds(daemon.proc.pid))
            if r == rounds - 1:
                _after_start(daemon, settings, loadgen, out)
    out["ready_s"] = statistics.median(startup["mcpd_s"])
    out["servers_alone_s"] = statistics.median(startup["floor_s"])
    out["daemon_cpu_to_ready_s"] = statistics.median(startup["daemon_cpu_to_ready_s"])
    return out


def _after_start(
    daemon: Daemon, settings: ScaleSettings, loadgen: Any, out: dict[str, Any]
) -> None:
    pid = daemon.proc.pid
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
    """N connections that each complete a handshake and then say nothing.

    Modern agents send ``server/discover``; legacy ones ``initialize`` and, once it is
    answered, ``notifications/initialized``, so the daemon holds a session for each.
    """

    def __init__(self, path: str, count: int, modern: bool = True) -> None:
        self.path = path
        self.count = count
        self.modern = modern
        self.socks: list[socket.socket] = []
        self.answered = 0
        self.failed: list[str] = []
        self.open_s = 0.0

    def __enter__(self) -> IdleAgents:
        t0 = time.perf_counter()
        if self.modern:
            line = request_line(1, "server/discover", None, modern=True)
        else:
            params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT_INFO}
            line = request_line(1, "initialize", params, modern=False)
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
        for sock in self.socks:
            sock.setblocking(False)
            sel.register(sock, selectors.EVENT_READ)
            buffers[sock] = b""
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
                    if not self.modern:
                        s.setblocking(True)
                        s.sendall(INITIALIZED)
                else:
                    self.failed.append((buffers[s] + chunk)[:200].decode(errors="replace"))
                sel.unregister(s)
                waiting -= 1
        if waiting:
            self.failed.append(f"{waiting} connection(s) got no handshake reply in time")
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
