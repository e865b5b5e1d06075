"""The peers a user might run instead of mcpd, installed where the bench keeps them and
started on the same upstream as mcpd's rows.

Each is pinned in a file of the bench's own and installed on first use: FastMCP and
mcp-proxy each in a venv of their own under ``bench/`` (``requirements-*.txt``), mcp-hub
under ``bench/node`` (``package.json`` and its lock file, with ``npm ci``). A peer that
cannot be installed here is skipped with the reason, as any configuration that cannot
run is.

    fastmcp-proxy       FastMCP's proxy (stdio to the agent) of the echo server over stdio
    fastmcp-proxy-http  the same proxy of the echo server over Streamable HTTP
    mcp-proxy           mcp-proxy (stdio to the agent) of the echo server over Streamable HTTP
    mcp-hub             mcp-hub (HTTP+SSE to the agent) of the echo server over Streamable HTTP
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.http_targets import http_echo
from bench.targets import (
    BENCH,
    PYTHON,
    ROOT,
    Env,
    Launch,
    TargetUnavailable,
    echo_command,
    log_tail,
    start,
    stop,
    wait_for,
)

NODE_DIR = BENCH / "node"
HUB_CLI = NODE_DIR / "node_modules" / "mcp-hub" / "dist" / "cli.js"


@dataclass(frozen=True)
class PythonPeer:
    venv: str  # under bench/
    requirements: str  # under bench/
    distribution: str  # whose version is printed

    @property
    def python(self) -> Path:
        return BENCH / self.venv / "bin" / "python"


FASTMCP = PythonPeer(".venv-fastmcp", "requirements-fastmcp.txt", "fastmcp")
MCP_PROXY = PythonPeer(".venv-mcp-proxy", "requirements-mcp-proxy.txt", "mcp-proxy")
# Which peers each configuration needs.
NEEDS = {
    "fastmcp-proxy": "fastmcp",
    "fastmcp-proxy-http": "fastmcp",
    "mcp-proxy": "mcp-proxy",
    "mcp-hub": "mcp-hub",
}


def _installed_version(peer: PythonPeer) -> str | None:
    check = [
        str(peer.python),
        "-c",
        f"import importlib.metadata as m; print(m.version({peer.distribution!r}))",
    ]
    if not peer.python.exists():
        return None
    done = subprocess.run(check, capture_output=True, text=True, timeout=120)
    return done.stdout.strip() if done.returncode == 0 else None


def ensure_python_peer(peer: PythonPeer, log: Path) -> tuple[str | None, str]:
    """The venv's python, made from the pinned requirements on first use, or None and why."""
    wanted = (BENCH / peer.requirements).read_text().split("==")[1].strip()
    venv = f"bench/{peer.venv}"
    if _installed_version(peer) == wanted:
        return str(peer.python), f"{peer.distribution} {wanted} from {venv}"
    print(f"  creating {venv} ({peer.distribution}=={wanted}) ...", flush=True)
    steps = [
        [PYTHON, "-m", "venv", "--clear", str(BENCH / peer.venv)],
        [str(peer.python), "-m", "pip", "install", "-q", "-r", str(BENCH / peer.requirements)],
    ]
    if not _run_steps(steps, log):
        why = f"{peer.distribution} skipped: could not install {peer.distribution}=={wanted}"
        return None, why + log_tail(log, 5)
    got = _installed_version(peer)
    if got is None:
        return None, f"{peer.distribution} skipped: it does not import after installing"
    return str(peer.python), f"{peer.distribution} {got} installed in {venv}"


def ensure_mcp_hub(log: Path) -> tuple[str | None, str]:
    """mcp-hub's command line, installed with ``npm ci`` on first use, or None and why."""
    wanted = json.loads((NODE_DIR / "package.json").read_text())["dependencies"]["mcp-hub"]
    node = shutil.which("node")
    npm = shutil.which("npm")
    if node is None or npm is None:
        return None, "mcp-hub skipped: node and npm are not on PATH"
    if _hub_version() != wanted:
        print(f"  installing mcp-hub {wanted} in bench/node ...", flush=True)
        ci = [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", str(NODE_DIR)]
        if not _run_steps([ci], log) or _hub_version() != wanted:
            return None, f"mcp-hub skipped: could not install mcp-hub {wanted}" + log_tail(log, 5)
    return node, f"mcp-hub {wanted} from bench/node (node {_node_version(node)})"


def _hub_version() -> str | None:
    try:
        return str(json.loads((HUB_CLI.parent.parent / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def _node_version(node: str) -> str:
    done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    return done.stdout.strip().lstrip("v")


def _run_steps(steps: list[list[str]], log: Path) -> bool:
    with open(log, "ab") as out:
        for step in steps:
            try:
                done = subprocess.run(step, stdout=out, stderr=out, cwd=ROOT, timeout=900)
            except (OSError, subprocess.TimeoutExpired):
                return False
            if done.returncode != 0:
                return False
    return True


def ensure(names: list[str], logdir: Path) -> tuple[dict[str, str], list[str]]:
    """The peers ``names`` (configurations) need: each one's command, and a line per
    peer with its version or why it is skipped."""
    found: dict[str, str] = {}
    notes: list[str] = []
    for peer in dict.fromkeys(NEEDS[n] for n in names if n in NEEDS):
        log = logdir / f"{peer}-install.log"
        if peer == "mcp-hub":
            command, note = ensure_mcp_hub(log)
        else:
            command, note = ensure_python_peer(FASTMCP if peer == "fastmcp" else MCP_PROXY, log)
        notes.append(note)
        if command is not None:
            found[peer] = command
    return found, notes


# --- configurations ---------------------------------------------------------------------


def _peer(env: Env, name: str) -> str:
    command = env.peers.get(NEEDS[name])
    if command is None:
        raise TargetUnavailable(f"{NEEDS[name]} is not installed (see the note above)")
    return command


def _spawn(env: Env, name: str, tool: str, cmd: list[str], *extra: str) -> Launch:
    cpus = ["--spawn-cpus", ",".join(map(str, sorted(env.target_cpus)))] if env.target_cpus else []
    stderr = ["--stderr", str(env.logdir / f"{name}.log")]
    return Launch([*extra, "--spawn", *cpus, *stderr, "--", *cmd], tool)


@contextlib.contextmanager
def fastmcp_proxy(env: Env) -> Iterator[Launch]:
    cmd = [_peer(env, "fastmcp-proxy"), str(BENCH / "fastmcp_proxy.py"), "--", *echo_command()]
    yield _spawn(env, "fastmcp-proxy", "echo_echo", cmd)


@contextlib.contextmanager
def fastmcp_proxy_http(env: Env) -> Iterator[Launch]:
    python = _peer(env, "fastmcp-proxy-http")
    with http_echo(env, "fastmcp-proxy-http") as (url, pid):
        cmd = [python, str(BENCH / "fastmcp_proxy.py"), "--url", url]
        yield _spawn(env, "fastmcp-proxy-http", "echo_echo", cmd, "--upstream-pid", str(pid))


@contextlib.contextmanager
def mcp_proxy(env: Env) -> Iterator[Launch]:
    """mcp-proxy speaks the legacy era to its agent only (the SDK's v1 server)."""
    python = Path(_peer(env, "mcp-proxy"))
    with http_echo(env, "mcp-proxy") as (url, pid):
        # Its default logs every request's headers at INFO; a user would turn that down.
        cmd = [str(python.parent / "mcp-proxy"), "--log-level", "WARNING"]
        cmd += ["--transport", "streamablehttp", url]
        yield _spawn(env, "mcp-proxy", "echo", cmd, "--legacy", "--upstream-pid", str(pid))


@contextlib.contextmanager
def mcp_hub(env: Env) -> Iterator[Launch]:
    """mcp-hub serves its agents HTTP+SSE of the legacy era at /mcp; it names the tool
    ``echo__echo``."""
    node = _peer(env, "mcp-hub")
    with http_echo(env, "mcp-hub") as (url, pid):
        config = env.workdir / "mcp-hub.json"
        config.write_text(json.dumps({"mcpServers": {"echo": {"url": url}}}))
        port = _free_port()
        log = env.logdir / "mcp-hub.log"
        proc = start([node, str(HUB_CLI), "--port", str(port), "--config", str(config)],
                     env.target_cpus, log)  # fmt: skip
        try:
            try:
                wait_for(lambda: _hub_ready(port), proc, 30)
            except TargetUnavailable as exc:
                raise TargetUnavailable(f"mcp-hub {exc}{log_tail(log)}") from None
            args = ["--legacy", "--sse", f"http://127.0.0.1:{port}/mcp"]
            args += ["--cpu-pid", str(proc.pid), "--upstream-pid", str(pid)]
            yield Launch(args, "echo__echo")
        finally:
            stop(proc)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _hub_ready(port: int) -> bool:
    """Up, with its server connected (its health answer lists it as connected)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as r:
            health = json.loads(r.read())
    except (OSError, ValueError, urllib.error.URLError):
        return False
    servers = health.get("servers") or []
    return bool(servers) and all(s.get("status") == "connected" for s in servers)


CONFIGURATIONS = {
    "fastmcp-proxy": fastmcp_proxy,
    "fastmcp-proxy-http": fastmcp_proxy_http,
    "mcp-proxy": mcp_proxy,
    "mcp-hub": mcp_hub,
}
