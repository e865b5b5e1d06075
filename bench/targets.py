"""The systems under test: how to start each configuration, wait for it, and stop it.

Every configuration yields the load generator's target arguments (``--spawn -- CMD`` or
``--connect SOCKET --cpu-pid PID``) and the tool name to call. Processes started here are
pinned to the target CPUs and stopped, with anything they left behind, on exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from bench import procstat

# Daemon has a field named ``socket``, which hides the module inside its class body.
Socket: TypeAlias = socket.socket

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
PYTHON = sys.executable
ECHO = str(BENCH / "echo_server.py")
EX_CONFIG = 78
# Without READY=1 by then, `mcpd status` is polled instead (see _wait_ready).
NOTIFY_GRACE = 5.0


class TargetUnavailable(Exception):
    """The configuration cannot run here; the message says why (printed as a note)."""


@dataclass
class Env:
    """What every configuration needs to know about this run."""

    workdir: Path  # short path for sockets (Unix socket paths are limited to 108 bytes)
    logdir: Path
    target_cpus: set[int] | None
    mcpd: list[str] | None
    peers: dict[str, str] = field(default_factory=dict)  # peer -> its command (bench.peers)
    daemon_options: dict[str, Any] = field(default_factory=dict)
    server_options: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class Launch:
    """How the load generator reaches a running configuration."""

    loadgen_args: list[str]
    tool: str


def echo_command(*extra: str) -> list[str]:
    return [PYTHON, ECHO, *extra]


def preexec(cpus: set[int] | None) -> Callable[[], None]:
    def setup() -> None:
        if cpus:
            os.sched_setaffinity(0, cpus)
        # The idle-connection run needs more than the usual 1024 descriptors; a daemon under
        # systemd would get LimitNOFILE the same way.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    return setup


def start(
    cmd: Sequence[str],
    cpus: set[int] | None,
    log: Path,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=env,
            preexec_fn=preexec(cpus),
        )


def stop(proc: subprocess.Popen[bytes], grace: float = 5.0) -> list[int]:
    """SIGTERM, wait, SIGKILL; then kill whatever it started and left running.

    Returns the pids of such leftovers, so that a daemon which orphans children is noticed.
    """
    below = procstat.descendants([proc.pid]) - {proc.pid}
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    # Children that saw their stdin close may need a moment to finish exiting.
    deadline = time.monotonic() + 0.5
    while (leftovers := [pid for pid in below if _is_running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in leftovers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return leftovers


def _is_running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != b"Z"


def log_tail(path: Path, lines: int = 15) -> str:
    """The last lines of a log, indented, after a newline; empty if there are none."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "".join("\n    " + line for line in text[-lines:])


def wait_for(predicate: Callable[[], bool], proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise TargetUnavailable(f"exited with status {proc.returncode} while starting")
        if time.monotonic() > deadline:
            raise TargetUnavailable(f"not ready after {timeout:.0f} s")
        time.sleep(0.01)


def socket_accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


# --- configurations -------------------------------------------------------------------


@contextlib.contextmanager
def direct(env: Env) -> Iterator[Launch]:
    yield Launch(["--spawn", *_spawn_cpus(env), "--", *echo_command()], "echo")


@contextlib.contextmanager
def _on_socket(env: Env, name: str, module: str, *options: str) -> Iterator[Launch]:
    """``python -m module --socket S options -- echo``, reached on its socket S."""
    sock = env.workdir / f"{name}.sock"
    log = env.logdir / f"{name}.log"
    cmd = [PYTHON, "-m", module, "--socket", str(sock), *options, "--", *echo_command()]
    proc = start(cmd, env.target_cpus, log)
    try:
        try:
            wait_for(lambda: socket_accepts(sock), proc, 20)
        except TargetUnavailable as exc:
            raise TargetUnavailable(f"{name} {exc}{log_tail(log)}") from None
        yield Launch(["--connect", str(sock), "--cpu-pid", str(proc.pid)], "echo")
    finally:
        stop(proc)


def relay(env: Env) -> contextlib.AbstractContextManager[Launch]:
    return _on_socket(env, "relay", "bench.relay")


def splice(env: Env) -> contextlib.AbstractContextManager[Launch]:
    return _on_socket(env, "splice", "bench.splicer", "--tool", "echo=echo")


def splice_gated(env: Env) -> contextlib.AbstractContextManager[Launch]:
    # mcpd's default for a stdio server: 4 calls at a time, the rest queued.
    return _on_socket(env, "splice-gate4", "bench.splicer", "--tool", "echo=echo", "--gate", "4")


@contextlib.contextmanager
def mcpd_stdio(env: Env) -> Iterator[Launch]:
    servers = {"echo": {"command": PYTHON, "args": [ECHO]}}
    with running_mcpd(env, "mcpd", servers, env.target_cpus) as daemon:
        yield Launch(daemon.loadgen_args(), "mcp__echo__echo")


@contextlib.contextmanager
def mcpd_unaudited(env: Env) -> Iterator[Launch]:
    """mcpd as ``mcpd`` runs, without its audit log: no record written, none logged."""
    servers = {"echo": {"command": PYTHON, "args": [ECHO]}}
    off = {"audit": False, "audit_journal": False}
    with running_mcpd(env, "mcpd-noaudit", servers, env.target_cpus, off) as daemon:
        yield Launch(daemon.loadgen_args(), "mcp__echo__echo")


@contextlib.contextmanager
def mcpd_gated(env: Env) -> Iterator[Launch]:
    """mcpd with the stdio server's gate raised to 64 calls at a time."""
    servers = {"echo": {"command": PYTHON, "args": [ECHO], "max_concurrency": 64}}
    with running_mcpd(env, "mcpd-gate64", servers, env.target_cpus) as daemon:
        yield Launch(daemon.loadgen_args(), "mcp__echo__echo")


CONFIGURATIONS: dict[str, Callable[[Env], contextlib.AbstractContextManager[Launch]]] = {
    "direct": direct,
    "relay": relay,
    "splice": splice,
    "splice-gate4": splice_gated,
    "mcpd": mcpd_stdio,
    "mcpd-noaudit": mcpd_unaudited,
    "mcpd-gate64": mcpd_gated,
}


def _spawn_cpus(env: Env) -> list[str]:
    if not env.target_cpus:
        return []
    return ["--spawn-cpus", ",".join(map(str, sorted(env.target_cpus)))]


# --- mcpd -------------------------------------------------------------------------------


def toml_value(value: Any) -> str:
    """Enough TOML for these configs: JSON strings, numbers and lists are valid TOML;
    a dict (a server's env) becomes an inline table."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        items = ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items())
        return "{ " + items + " }"
    return json.dumps(value)


def mcpd_config(
    sock: Path,
    servers: dict[str, dict[str, Any]],
    daemon_options: dict[str, Any],
    server_options: dict[str, Any],
) -> str:
    lines = ["[daemon]", f"socket = {toml_value(str(sock))}"]
    lines += [f"{k} = {toml_value(v)}" for k, v in daemon_options.items()]
    for alias, table in servers.items():
        lines += ["", f"[servers.{alias}]"]
        lines += [f"{k} = {toml_value(v)}" for k, v in {**table, **server_options}.items()]
    return "\n".join(lines) + "\n"


@dataclass
class Daemon:
    proc: subprocess.Popen[bytes]
    socket: Path
    log: Path
    started_at: float  # time.monotonic() just before the spawn
    ready_s: float = 0.0  # start-up to ready, by `mcpd status`
    notify_ready_s: float | None = None  # start-up to READY=1 on NOTIFY_SOCKET, if it came
    status: dict[str, Any] = field(default_factory=dict)
    notify: Socket | None = None  # our end of NOTIFY_SOCKET, until ready
    ready_by: str = ""

    def loadgen_args(self) -> list[str]:
        return ["--connect", str(self.socket), "--cpu-pid", str(self.proc.pid)]


def find_mcpd(explicit: str | None) -> tuple[list[str] | None, str]:
    """The command that runs mcpd's CLI, or None and the reason it cannot run yet."""
    if explicit:
        return shlex.split(explicit), f"mcpd command: {explicit}"
    probe = subprocess.run(
        [PYTHON, "-c", "import mcpd.cli"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"mcpd is not runnable yet (import mcpd.cli failed: {last})"
    script = Path(PYTHON).parent / "mcpd"
    if script.exists():
        return [str(script)], f"mcpd command: {script}"
    return [PYTHON, "-c", "import sys; from mcpd.cli import main; sys.exit(main())"], "mcpd via -c"


def mcpd_status(env: Env, sock: Path) -> dict[str, Any] | None:
    assert env.mcpd is not None
    try:
        done = subprocess.run(
            [*env.mcpd, "status", "--json", "--socket", str(sock)],
            capture_output=True,
            timeout=10,
            cwd=ROOT,
        )
        return json.loads(done.stdout) if done.returncode == 0 else None
    except (subprocess.TimeoutExpired, ValueError):
        return None


def all_ready(status: dict[str, Any] | None, aliases: set[str]) -> bool:
    if not status:
        return False
    states = {s.get("alias"): s.get("state") for s in status.get("servers", [])}
    return all(states.get(alias) == "ready" for alias in aliases)


@contextlib.contextmanager
def running_mcpd(
    env: Env,
    name: str,
    servers: dict[str, dict[str, Any]],
    cpus: set[int] | None,
    daemon_options: dict[str, Any] | None = None,
    timeout: float = 30.0,
) -> Iterator[Daemon]:
    """Start `mcpd serve`, wait until every server is ready, stop it afterwards.

    Options the daemon rejects as a config error (exit 78) are dropped and the start is
    retried once, so that a tuning key that mcpd does not have yet never blocks a run.
    """
    if env.mcpd is None:
        raise TargetUnavailable("mcpd is not runnable yet (see the note above)")
    options = {**env.daemon_options, **(daemon_options or {})}
    server_options = dict(env.server_options)
    dropped: list[str] = []
    for attempt in range(2):
        daemon = _spawn_mcpd(env, name, servers, cpus, options, server_options)
        try:
            _wait_ready(env, daemon, set(servers), timeout)
        except TargetUnavailable as exc:
            stop(daemon.proc)
            rejected = daemon.proc.returncode == EX_CONFIG
            if attempt == 0 and rejected and (options or server_options):
                dropped = [f"daemon.{k}" for k in options] + [
                    f"servers.*.{k}" for k in server_options
                ]
                options, server_options = {}, {}
                continue
            raise TargetUnavailable(f"mcpd ({name}) {exc}{log_tail(daemon.log)}") from None
        break
    if dropped:
        env.notes.append(f"{name}: mcpd rejected {', '.join(dropped)}; ran without them")
    try:
        yield daemon
    finally:
        leftovers = stop(daemon.proc)
        if leftovers:
            env.notes.append(f"{name}: mcpd left {len(leftovers)} child process(es) running")


def _spawn_mcpd(
    env: Env,
    name: str,
    servers: dict[str, dict[str, Any]],
    cpus: set[int] | None,
    options: dict[str, Any],
    server_options: dict[str, Any],
) -> Daemon:
    assert env.mcpd is not None
    sock = env.workdir / f"{name}.sock"
    if "state_dir" not in options:
        # Every start is a first start: no registry.json of an earlier daemon (the 10,000
        # tools of the scale run, say) is read back, and none is left in the system's.
        state = Path(tempfile.mkdtemp(prefix=f"{name}-state-", dir=env.workdir))
        options = {**options, "state_dir": str(state)}
    config = env.logdir / f"{name}.toml"  # kept with the logs, to rerun by hand
    config.write_text(mcpd_config(sock, servers, options, server_options))
    log = env.logdir / f"{name}.log"
    notify_path = env.workdir / f"{name}.notify"
    notify_path.unlink(missing_ok=True)
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(notify_path))
    child_env = {**os.environ, "NOTIFY_SOCKET": str(notify_path)}
    started_at = time.monotonic()
    proc = start([*env.mcpd, "serve", "--config", str(config)], cpus, log, child_env)
    return Daemon(proc, sock, log, started_at, notify=notify)


def _wait_ready(env: Env, daemon: Daemon, aliases: set[str], timeout: float) -> None:
    """Ready = every server `ready` in `mcpd status`; READY=1 on NOTIFY_SOCKET, when it
    comes, tells exactly when.

    A status call is a process of its own (~0.1 s of CPU, on the same two cores as the
    start-up being measured), so none runs before READY=1 arrives, and one runs at once
    after it. If that poll confirms READY=1, the start-up time is READY=1's. A daemon that
    sends no READY=1 is polled from NOTIFY_GRACE seconds on, and its time is the poll's.
    """
    notify = daemon.notify
    assert notify is not None
    daemon.notify = None
    notify.setblocking(False)
    deadline = daemon.started_at + timeout
    next_poll = daemon.started_at + NOTIFY_GRACE
    confirmed_at_notify = False
    try:
        while True:
            if _drain_ready(notify) and daemon.notify_ready_s is None:
                daemon.notify_ready_s = time.monotonic() - daemon.started_at
                next_poll = 0.0
                confirmed_at_notify = True
            if daemon.proc.poll() is not None:
                raise TargetUnavailable(f"exited with status {daemon.proc.returncode}")
            now = time.monotonic()
            if now >= next_poll and daemon.socket.exists():
                status = mcpd_status(env, daemon.socket)
                if all_ready(status, aliases):
                    assert status is not None
                    daemon.status = status
                    if confirmed_at_notify and daemon.notify_ready_s is not None:
                        daemon.ready_s = daemon.notify_ready_s
                        daemon.ready_by = "READY=1, confirmed by mcpd status"
                    else:
                        daemon.ready_s = time.monotonic() - daemon.started_at
                        daemon.ready_by = "mcpd status poll"
                    return
                confirmed_at_notify = False
                next_poll = time.monotonic() + (0.02 if daemon.notify_ready_s else 0.25)
            if now > deadline:
                raise TargetUnavailable(f"servers not all ready after {timeout:.0f} s")
            select.select([notify], [], [], max(0.0, min(0.05, next_poll - now)))
    finally:
        notify.close()


def _drain_ready(notify: socket.socket) -> bool:
    seen = False
    while True:
        try:
            message = notify.recv(4096)
        except (BlockingIOError, InterruptedError):
            return seen
        seen = seen or b"READY=1" in message.split(b"\n")
