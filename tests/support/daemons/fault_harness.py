"""The fault suite's harness: mcpd as a separate process, measured from /proc, and agents
that count every request they send and every reply they get, by id.

A case starts a daemon with one well-behaved server (``steady``), measures it, adds
the hostile servers with a reload, runs the case while a steady agent keeps calling
the well-behaved server, removes the hostile servers with a second reload and
measures again. Before and after are then the same configuration, so file
descriptors, trio tasks and child processes must be back to exactly where they were.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import socket as stdsocket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from tests.support.system.procs import host_pid, started_at, still_runs, wait_gone

ROOT = Path(__file__).resolve().parents[3]
HOSTILE_STDIO = str(Path(__file__).parents[1] / "hostile" / "stdio_server.py")
MIB = 1024 * 1024

# Every figure the suite measured, one row per case, for the summary table.
RESULTS: list[CaseResult] = []


# -- configuration --------------------------------------------------------------------------


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML for {value!r}")


def toml_config(daemon: dict[str, Any], servers: dict[str, dict[str, Any]]) -> str:
    lines = ["[daemon]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in daemon.items()]
    for alias, server in servers.items():
        lines.append(f"\n[servers.{alias}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in server.items()]
    return "\n".join(lines) + "\n"


def hostile(pid_dir: Path, *flags: str, **settings: Any) -> dict[str, Any]:
    """A server entry that runs the hostile stdio server with ``flags``."""
    return {
        "command": sys.executable,
        "args": [HOSTILE_STDIO, "--pid-dir", str(pid_dir), *flags],
        **settings,
    }


# -- reading a process from /proc -------------------------------------------------------------


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(ppid, session id, state) of ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()
    return int(fields[1]), int(fields[3]), fields[0].decode()


def processes_of(pid: int, sessions: Iterable[int] = ()) -> set[int]:
    """Live descendants of ``pid``, plus every live process in the given sessions (a
    server's helpers stay in its session even when they outlive it and are re-parented)."""
    table: dict[int, tuple[int, int, str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = _stat(int(entry))
            if info is not None:
                table[int(entry)] = info
    children: dict[int, list[int]] = {}
    for child, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(child)
    found: set[int] = set()
    todo = list(children.get(pid, ()))
    while todo:
        p = todo.pop()
        if p not in found:
            found.add(p)
            todo.extend(children.get(p, ()))
    wanted = set(sessions) | {table[p][1] for p in found}
    found |= {p for p, (_, sid, _) in table.items() if sid in wanted and p != pid}
    return {p for p in found if table[p][2] not in ("Z", "X")}


def memory_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in KiB."""
    rss = hwm = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    return rss, hwm


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_links(pid: int) -> dict[int, str]:
    """What each open descriptor is, for the message when a count does not match."""
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            out[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
    return dict(sorted(out.items()))


def alive(pid: int) -> bool:
    info = _stat(pid)
    return info is not None and info[2] not in ("Z", "X")


@dataclass
class Snapshot:
    fds: int
    tasks: int
    children: int
    rss_kib: int
    links: dict[int, str] = field(default_factory=dict, repr=False)


# -- the daemon as a separate process -----------------------------------------------------------


class Daemon:
    """``mcpd serve --config F --log stderr`` in its own process (through ``daemons.probe``,
    which adds the task census). Readiness and reloads are read from its sd_notify
    datagrams, not guessed."""

    def __init__(self, workdir: Path, daemon: dict[str, Any], servers: dict[str, Any]) -> None:
        self.workdir = workdir
        self.socket_path = str(workdir / "mcpd.sock")
        self.config_path = workdir / "mcpd.toml"
        self.log_path = workdir / "mcpd.log"
        self.pid_dir = workdir / "pids"
        self.pid_dir.mkdir(exist_ok=True)
        self.daemon_settings = {"socket": self.socket_path, **daemon}
        self.servers = dict(servers)
        self.process: trio.Process | None = None
        self._notify = trio.socket.socket(stdsocket.AF_UNIX, stdsocket.SOCK_DGRAM)
        self._notify_path = str(workdir / "notify.sock")
        self._messages: list[dict[str, str]] = []
        self._arrived = trio.Event()
        self.seen_pids: set[int] = set()
        self.born: dict[int, float] = {}
        self._log_file: Any = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def write_config(self) -> None:
        self.config_path.write_text(toml_config(self.daemon_settings, self.servers))

    async def start(self, nursery: trio.Nursery) -> None:
        await self._notify.bind(self._notify_path)
        nursery.start_soon(self._read_notify)
        self.write_config()
        env = {
            **os.environ,
            "NOTIFY_SOCKET": self._notify_path,
            "MCPD_FAULTS_CENSUS": self._notify_path,
            "PYTHONPATH": str(ROOT),
        }
        self._log_file = open(self.log_path, "wb")  # noqa: SIM115
        self.process = await trio.lowlevel.open_process(
            [
                sys.executable,
                "-m",
                "tests.support.daemons.probe",
                "serve",
                "--config",
                str(self.config_path),
                "--log",
                "stderr",
            ],
            cwd=str(ROOT),
            env=env,
            stdin=subprocess_devnull(),
            stdout=self._log_file,
            stderr=self._log_file,
        )
        await self.wait_message(lambda m: "READY" in m, what="READY=1 at start-up", timeout=30)

    async def _read_notify(self) -> None:
        while True:
            data = await self._notify.recv(65536)
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            self._messages.append(fields)
            self._arrived.set()
            self._arrived = trio.Event()

    async def wait_message(
        self, match: Callable[[dict[str, str]], bool], *, what: str, timeout: float, start: int = 0
    ) -> dict[str, str]:
        """The first sd_notify message from index ``start`` on that ``match``es."""
        with trio.fail_after(timeout):
            index = start
            while True:
                while index < len(self._messages):
                    msg = self._messages[index]
                    index += 1
                    if match(msg):
                        return msg
                if self.process is not None and self.process.poll() is not None:
                    raise AssertionError(
                        f"mcpd exited ({self.process.returncode}) waiting for {what}"
                    )
                await self._arrived.wait()

    async def census(self) -> int:
        """The daemon's trio task count, asked for with SIGUSR1."""
        start = len(self._messages)
        os.kill(self.pid, signal.SIGUSR1)
        msg = await self.wait_message(
            lambda m: "CENSUS" in m, what="census", timeout=5, start=start
        )
        return int(msg["CENSUS"].split("=", 1)[1])

    async def reload(self, servers: dict[str, Any], **daemon: Any) -> None:
        """Write a new config, SIGHUP, and wait until the reload is done."""
        self.servers = dict(servers)
        self.daemon_settings.update(daemon)
        self.write_config()
        start = len(self._messages)
        os.kill(self.pid, signal.SIGHUP)
        await self.wait_message(
            lambda m: "RELOADING" in m, what="RELOADING=1", timeout=10, start=start
        )
        await self.wait_message(
            lambda m: "READY" in m, what="READY=1 after reload", timeout=60, start=start
        )

    def log(self, since: int = 0) -> str:
        return self.log_path.read_bytes()[since:].decode("utf-8", "replace")

    def log_size(self) -> int:
        return self.log_path.stat().st_size

    def recorded_pids(self) -> set[int]:
        """The pids, as mcpd sees them, of the live processes the servers recorded."""
        return set(self.recorded())

    def recorded(self) -> dict[int, float]:
        """The pids the servers recorded, each with when it was recorded: a process under
        that pid that started later is another."""
        found = {}
        for p in self.pid_dir.rglob("*"):
            if p.suffix == ".tmp" or not p.name.partition("-")[0].isdigit():
                continue
            with contextlib.suppress(OSError, ValueError):  # gone: nothing left to find
                found[host_pid(p.read_text())] = p.stat().st_mtime
        return found

    def processes(self) -> set[int]:
        found = processes_of(self.pid, self.recorded_pids())
        for pid in found - self.seen_pids:
            start = started_at(pid)
            if start is not None:
                self.born[pid] = start
        self.seen_pids |= found
        return found

    def known(self) -> dict[int, float | None]:
        """Every pid seen or recorded, with when its process was known to run."""
        known: dict[int, float | None] = {pid: self.born.get(pid) for pid in self.seen_pids}
        for pid, at in self.recorded().items():
            seen = known.get(pid)
            known[pid] = at if seen is None else max(seen, at)
        return known

    async def snapshot(self) -> Snapshot:
        return Snapshot(
            fds=fd_count(self.pid),
            tasks=await self.census(),
            children=len(self.processes()),
            rss_kib=memory_kib(self.pid)[0],
            links=fd_links(self.pid),
        )

    def reset_peak(self) -> None:
        """Start VmHWM again from the current RSS (``5`` to clear_refs, Linux >= 4.0)."""
        with open(f"/proc/{self.pid}/clear_refs", "w") as f:
            f.write("5")

    async def stop(self, timeout: float = 30) -> int:
        """SIGTERM, as systemd stops it; the exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        with trio.fail_after(timeout):
            code = await self.process.wait()
        self._log_file.close()
        return code

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        for pid, born_by in self.known().items():
            if still_runs(pid, born_by):  # not another process given the same pid since
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        self._notify.close()


def subprocess_devnull() -> int:
    import subprocess

    return subprocess.DEVNULL


# -- agents -----------------------------------------------------------------------------------


def id_key(rid: Any) -> str:
    """Ids as JSON text, so 1 and "1" stay two different ids."""
    return json.dumps(rid)


@dataclass
class Tally:
    """Requests and replies of every counted agent in a case."""

    sent: int = 0
    answered: int = 0
    duplicates: int = 0
    stray: int = 0  # replies to no request we sent
    bad_lines: int = 0  # lines from mcpd that are not valid UTF-8 JSON
    healthy_ok: int = 0
    healthy_failed: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return self.sent - self.answered


class Agent:
    """One agent connection. Every request it sends is expected back exactly once."""

    _counter = itertools.count(1)

    def __init__(self, stream: trio.SocketStream, tally: Tally) -> None:
        self.stream = stream
        self.tally = tally
        self.name = f"agent{next(self._counter)}"
        self._ids = itertools.count(1)
        self._waiting: dict[str, trio.MemorySendChannel[dict[str, Any]]] = {}
        self.expected: dict[str, int] = {}  # id -> replies still owed (0 or 1)
        self.replies: dict[str, int] = {}
        self.other: list[dict[str, Any]] = []  # notifications
        self.expected_null = 0  # lines owed an error reply without an id
        self.null_replies = 0
        self.closed = trio.Event()
        self._settled = trio.Event()
        self._lock = trio.Lock()

    def new_id(self) -> str:
        return f"{self.name}-{next(self._ids)}"

    async def reader(self) -> None:
        buf = bytearray()
        try:
            while True:
                data = await self.stream.receive_some(1 << 16)
                if not data:
                    break
                buf += data
                while (nl := buf.find(b"\n")) >= 0:
                    line = bytes(buf[:nl])
                    del buf[: nl + 1]
                    self._line(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.closed.set()
            self._settled.set()
            for ch in self._waiting.values():
                ch.close()
            self._waiting.clear()

    def _line(self, line: bytes) -> None:
        try:
            msg = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            self.tally.bad_lines += 1
            self.tally.failures.append(f"not UTF-8 JSON from mcpd: {line[:120]!r}")
            return
        if not isinstance(msg, dict) or "method" in msg:
            self.other.append(msg if isinstance(msg, dict) else {"value": msg})
            return
        if msg.get("id") is None:
            # The answer to a line mcpd could not read far enough to find an id.
            self.null_replies += 1
            if self.null_replies <= self.expected_null:
                self.tally.answered += 1
            else:
                self.tally.stray += 1
                self.tally.failures.append(f"unexpected reply without an id: {str(msg)[:200]}")
            if not self.outstanding:
                self._settled.set()
            return
        key = id_key(msg["id"])
        count = self.replies[key] = self.replies.get(key, 0) + 1
        if key not in self.expected:
            self.tally.stray += 1
            self.tally.failures.append(f"reply to an id never sent: {str(msg)[:200]}")
        elif count == 1:
            self.tally.answered += 1
            self.expected[key] = 0
        else:
            self.tally.duplicates += 1
            self.tally.failures.append(f"second reply for id {key}: {str(msg)[:200]}")
        ch = self._waiting.pop(key, None)
        if ch is not None:
            ch.send_nowait(msg)
        if not self.outstanding:
            self._settled.set()

    def expect(self, rid: Any) -> None:
        """Count a request sent by hand (``send_line``) that must get one reply."""
        key = id_key(rid)
        assert key not in self.expected, f"id {key} reused by the test"
        self.expected[key] = 1
        self.tally.sent += 1
        self._settled = trio.Event()

    def expect_null(self, count: int = 1) -> None:
        """Count lines sent by hand that must each get one error reply with a null id."""
        self.expected_null += count
        self.tally.sent += count
        self._settled = trio.Event()

    async def send_line(self, data: bytes) -> None:
        async with self._lock:
            await self.stream.send_all(data if data.endswith(b"\n") else data + b"\n")

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        rid: Any = None,
        timeout: float = 30,
    ) -> dict[str, Any]:
        rid = self.new_id() if rid is None else rid
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        p = dict(params or {})
        p["_meta"] = {**META, **p.get("_meta", {})}
        body["params"] = p
        send, recv = trio.open_memory_channel[dict[str, Any]](1)
        key = id_key(rid)
        self._waiting[key] = send
        self.expect(rid)
        with trio.fail_after(timeout):
            await self.send_line(json.dumps(body).encode())
            async with recv:
                try:
                    return await recv.receive()
                except trio.EndOfChannel:
                    raise ConnectionError(
                        f"{self.name}: connection closed before reply {key}"
                    ) from None

    async def call(self, name: str, text: str = "", *, timeout: float = 30) -> dict[str, Any]:
        """tools/call; the whole reply (a result, or a JSON-RPC error)."""
        return await self.request(
            "tools/call", {"name": name, "arguments": {"text": text}}, timeout=timeout
        )

    async def settle(self, timeout: float = 30) -> None:
        """Wait until every request sent got its reply (or the connection closed)."""
        with trio.fail_after(timeout):
            while self.outstanding and not self.closed.is_set():
                await self._settled.wait()
                if self.outstanding and not self.closed.is_set():
                    self._settled = trio.Event()

    @property
    def outstanding(self) -> int:
        return sum(self.expected.values()) + max(0, self.expected_null - self.null_replies)


META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "fault-agent", "version": "0"},
}


@contextlib.asynccontextmanager
async def agent(daemon: Daemon, tally: Tally) -> AsyncIterator[Agent]:
    with trio.fail_after(10):
        stream = await trio.open_unix_socket(daemon.socket_path)
    a = Agent(stream, tally)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(a.reader)
        try:
            yield a
            # Every request sent must be answered before the agent may go.
            await a.settle()
        finally:
            await trio.aclose_forcefully(stream)
            nursery.cancel_scope.cancel()


def text_of(reply: dict[str, Any]) -> str:
    result = reply.get("result") or {}
    return "".join(b.get("text", "") for b in result.get("content", []) if isinstance(b, dict))


def is_error_result(reply: dict[str, Any]) -> bool:
    return "result" in reply and reply["result"].get("isError") is True


# -- one case ---------------------------------------------------------------------------------


@dataclass
class CaseResult:
    group: str
    case: str
    sent: int
    answered: int
    lost: int
    duplicates: int
    healthy_ok: int
    healthy_failed: int
    rss_start_mib: float
    peak_rss_mib: float
    growth_mib: float
    fds_before: int
    fds_after: int
    tasks_before: int
    tasks_after: int
    children_before: int
    children_after: int
    seconds: float
    log_lines: int = 0
    note: str = ""


class Case:
    """What a case body gets: the daemon, the tally, and the hostile servers' aliases."""

    def __init__(self, daemon: Daemon, tally: Tally, workdir: Path) -> None:
        self.daemon = daemon
        self.tally = tally
        self.workdir = workdir
        self.note = ""

    def agent(self) -> contextlib.AbstractAsyncContextManager[Agent]:
        return agent(self.daemon, self.tally)

    async def status(self, a: Agent) -> dict[str, Any]:
        reply = await a.request("mcpd/status")
        return reply["result"]  # type: ignore[no-any-return]

    async def wait_state(
        self,
        a: Agent,
        alias: str,
        states: Iterable[str],
        timeout: float = 30,
        *,
        restarted: bool = False,
    ) -> dict[str, Any]:
        """The server's status once its state is one of ``states`` (or, ``restarted``,
        once it went down and is tried again: a retry's jitter can make its time down
        shorter than a look at its status takes)."""
        wanted = set(states)
        seen: dict[str, Any] = {}
        with trio.move_on_after(timeout):
            while True:
                for s in (await self.status(a))["servers"]:
                    if s["alias"] == alias:
                        seen = s
                        if s["state"] in wanted or (restarted and s["restarts"] > 0):
                            return s  # type: ignore[no-any-return]
                await trio.sleep(0.05)
        raise AssertionError(f"{alias} not {sorted(wanted)} within {timeout} s: {seen}")


STEADY_TOOL = "mcp__steady__echo"


async def steady_calls(a: Agent, stop: trio.Event, tally: Tally) -> None:
    """The well-behaved server must answer every call, whatever the others do."""
    i = 0
    while not stop.is_set():
        reply = await a.call(STEADY_TOOL, f"s{i}", timeout=30)
        if text_of(reply) == f"echo:s{i}" and not is_error_result(reply):
            tally.healthy_ok += 1
        else:
            tally.healthy_failed += 1
            tally.failures.append(f"steady call failed: {str(reply)[:300]}")
        i += 1
        await trio.sleep(0.01)


def short_tmp() -> Path:
    # Unix socket paths must stay under 108 bytes; pytest's tmp_path can be longer.
    return Path(tempfile.mkdtemp(prefix="mcpdf-"))


async def run_case(
    group: str,
    name: str,
    body: Callable[[Case], Awaitable[None]],
    *,
    servers: Callable[[Path], dict[str, Any]],
    daemon: dict[str, Any] | None = None,
    rss_bound_mib: float = 40,
    log_expect: Iterable[str] = (),
    steady: bool = True,
    timeout: float = 90,
) -> CaseResult:
    """Run one case end to end and check everything the suite promises about it."""
    workdir = short_tmp()
    pid_dir = workdir / "pids"
    pid_dir.mkdir()
    settings = {
        "startup_deadline": 10.0,
        "backoff_base": 0.1,
        "backoff_cap": 0.5,
        "call_timeout": 2.0,
        "probe_timeout": 2.0,
        "list_timeout": 10.0,
        **(daemon or {}),
    }
    base = {"steady": hostile(pid_dir)}
    d = Daemon(workdir, settings, base)
    tally = Tally()
    started = time.monotonic()
    try:
        with trio.fail_after(timeout):
            async with trio.open_nursery() as nursery:
                await d.start(nursery)
                result = await _run(
                    d,
                    group,
                    name,
                    body,
                    servers(pid_dir),
                    base,
                    tally,
                    workdir,
                    rss_bound_mib=rss_bound_mib,
                    steady=steady,
                    log_expect=log_expect,
                    started=started,
                )
                nursery.cancel_scope.cancel()
    except Exception:
        # The daemon's side of the story, for the report of the failing case.
        if d.log_path.exists():
            print(f"--- mcpd log of {group}/{name} ---\n{d.log()[-8000:]}")
        raise
    finally:
        d.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    return result


async def _run(
    d: Daemon,
    group: str,
    name: str,
    body: Callable[[Case], Awaitable[None]],
    extra: dict[str, Any],
    base: dict[str, Any],
    tally: Tally,
    workdir: Path,
    *,
    rss_bound_mib: float,
    steady: bool,
    log_expect: Iterable[str],
    started: float,
) -> CaseResult:
    case = Case(d, tally, workdir)
    async with case.agent() as probe, case.agent() as steady_agent:
        await probe.request("mcpd/status")
        await steady_agent.call(STEADY_TOOL, "warm-up")
        before = await d.snapshot()
        log_start = d.log_size()
        await d.reload({**base, **extra})
        for alias in extra:
            if d.servers[alias].get("enabled", True):
                await case.wait_state(probe, alias, {"ready", "failed", "crash_loop", "degraded"})
        rss_start = memory_kib(d.pid)[0]
        d.reset_peak()
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            if steady:
                nursery.start_soon(steady_calls, steady_agent, stop, tally)
            await body(case)
            stop.set()
        _, hwm = memory_kib(d.pid)
        await probe.request("ping")
        await d.reload(base)
        after = await _settled(d, before, probe)
        await steady_agent.settle()
        await probe.settle()
    log = d.log(log_start)
    code = await d.stop()
    # A server's processes are killed as mcpd exits (parent-death signal, the end of
    # their PID namespace), which the kernel finishes a moment later: any still there
    # after that moment were left behind.
    leftovers = [p for p, by in d.known().items() if not await wait_gone(p, 5.0, born_by=by)]
    result = CaseResult(
        group=group,
        case=name,
        sent=tally.sent,
        answered=tally.answered,
        lost=tally.lost,
        duplicates=tally.duplicates,
        healthy_ok=tally.healthy_ok,
        healthy_failed=tally.healthy_failed,
        rss_start_mib=rss_start / 1024,
        peak_rss_mib=hwm / 1024,
        growth_mib=(hwm - rss_start) / 1024,
        fds_before=before.fds,
        fds_after=after.fds,
        tasks_before=before.tasks,
        tasks_after=after.tasks,
        children_before=before.children,
        children_after=after.children,
        seconds=time.monotonic() - started,
        log_lines=log.count("\n"),
        note=case.note,
    )
    RESULTS.append(result)
    problems = list(tally.failures[:10])
    if code != 0:
        problems.append(f"mcpd exited with {code} on SIGTERM")
    if tally.lost or tally.duplicates or tally.stray or tally.bad_lines:
        problems.append(
            f"replies: sent {tally.sent}, answered {tally.answered}, duplicates "
            f"{tally.duplicates}, stray {tally.stray}, bad lines {tally.bad_lines}"
        )
    if steady and (tally.healthy_failed or not tally.healthy_ok):
        problems.append(f"steady server: {tally.healthy_ok} ok, {tally.healthy_failed} failed")
    if result.growth_mib > rss_bound_mib:
        problems.append(f"RSS grew {result.growth_mib:.1f} MiB (bound {rss_bound_mib} MiB)")
    if (after.fds, after.tasks, after.children) != (before.fds, before.tasks, before.children):
        problems.append(f"leak: before {before}, after {after}")
        problems.append(f"fds now open that were not before: {_new_fds(before, after, d)}")
    if leftovers:
        problems.append(f"processes left after mcpd stopped: {leftovers}")
    for pattern in log_expect:
        if not re.search(pattern, log):
            problems.append(f"log has no line matching {pattern!r}")
    if re.search(r"Traceback|unexpected error|CRITICAL", log):
        problems.append("mcpd logged a traceback:\n" + log[-3000:])
    assert not problems, (
        f"{group}/{name}:\n" + "\n".join(problems) + "\n--- log ---\n" + log[-4000:]
    )
    return result


def _new_fds(before: Snapshot, after: Snapshot, d: Daemon) -> dict[int, str]:
    return {fd: link for fd, link in after.links.items() if before.links.get(fd) != link}


async def _settled(d: Daemon, before: Snapshot, probe: Agent, timeout: float = 20) -> Snapshot:
    """The daemon's figures once they are back to ``before`` (or the last ones seen)."""
    with trio.move_on_after(timeout):
        while True:
            now = await d.snapshot()
            if (now.fds, now.tasks, now.children) == (before.fds, before.tasks, before.children):
                return now
            await trio.sleep(0.1)
    return await d.snapshot()
