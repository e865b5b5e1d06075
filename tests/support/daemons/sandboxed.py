"""A daemon of its own for the sandbox tests: ``mcpd serve`` as a separate process (an
attack that reached it must not take the test runner down with it), with a home, a
state directory holding an endpoint token and an OAuth store, and a secret in its
environment that the config resolves for an HTTP server's header."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import Agent, connect
from tests.support.daemons.fault_harness import toml_value
from tests.support.system.procs import SCRIPTED, alive

ROOT = Path(__file__).resolve().parents[3]
HOSTILE = str(Path(__file__).parents[1] / "breakout" / "hostile_server.py")
HOARDING = str(Path(__file__).parents[1] / "breakout" / "hoarding_server.py")
SECRET = "tickets-secret-0451"  # TICKETS_TOKEN in mcpd's environment
ENDPOINT_TOKEN = "endpoint-token-7e3f"
OAUTH_TOKEN = "oauth-access-token-91c2"
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nplanted\n"
# What a strict sandbox must show for the test servers' interpreter and code to run.
RUNTIME = sorted({sys.prefix, sys.base_prefix, str(Path(HOSTILE).parent)})


def as_ordinary_user() -> tuple[str, ...]:
    """The command line that runs what follows it as an ordinary user (uid 1000 in a
    user namespace of its own, holding no capability), as mcpd runs for a user; a
    skip where ``unshare`` cannot map one (util-linux before 2.38)."""
    argv = ("unshare", "--user", "--map-user=1000", "--map-group=1000")
    try:
        done = subprocess.run([*argv, "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot run mcpd as an ordinary user here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot run mcpd as an ordinary user here: {done.stderr.decode()}")
    return argv


def hostile(**settings: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [HOSTILE], **settings}


def hoarding(**settings: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [HOARDING], **settings}


def steady() -> dict[str, Any]:
    return {"command": sys.executable, "args": [SCRIPTED]}


class Served:
    def __init__(
        self, proc: subprocess.Popen[str], socket: str, log: Path, home: Path, config: Path
    ) -> None:
        self.proc = proc
        self.socket = socket
        self.log_path = log
        self.home = home
        self.config = config
        # Told of each line the copier writes: mcpd's log reaches the file through a
        # pipe and a thread, after whatever mcpd answered as it wrote the line.
        self.written = threading.Condition()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def logged(self, text: str, timeout: float = 30) -> str:
        """The log once it holds ``text`` (or as it is after ``timeout`` seconds)."""

        def wait() -> str:
            with self.written:
                self.written.wait_for(lambda: text in self.log(), timeout)
            return self.log()

        return await trio.to_thread.run_sync(wait)

    async def status(self) -> dict[str, Any]:
        async with connect(self.socket) as agent:
            result: dict[str, Any] = await agent.result("mcpd/status")
        return {s["alias"]: s for s in result["servers"]}


def toml(daemon: dict[str, Any], servers: dict[str, dict[str, Any]], extra: str = "") -> str:
    lines = ["[daemon]", *(f"{k} = {toml_value(v)}" for k, v in daemon.items())]
    for alias, body in servers.items():
        lines.append(f"[servers.{alias}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in body.items()]
    return "\n".join(lines) + "\n" + extra


def plant(tmp: Path) -> tuple[Path, Path]:
    """A home with an SSH key, a state directory with the files mcpd keeps secret."""
    home, state = tmp / "home", tmp / "state"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(SSH_KEY)
    (state / "oauth").mkdir(parents=True)
    (state / "token").write_text(ENDPOINT_TOKEN + "\n")
    (state / "oauth" / "tickets.json").write_text(json.dumps({"access_token": OAUTH_TOKEN}))
    # Private, as mcpd writes them: a token file others could read is replaced at start.
    (state / "token").chmod(0o600)
    (state / "oauth" / "tickets.json").chmod(0o600)
    return home, state


@contextlib.contextmanager
def serving(
    tmp: Path,
    servers: dict[str, dict[str, Any]],
    extra: str = "",
    wrap: tuple[str, ...] = (),
    cwd: Path | None = None,
    config_dir: Path | None = None,
    config_in: Path | None = None,
    **daemon: Any,
) -> Iterator[Served]:
    """``mcpd serve`` with these servers (and the tickets server), run through the
    command line ``wrap`` if given; in ``cwd``, if given, with its config named
    relatively to it; its config in ``config_dir`` when given, else beside its home,
    and that a symbolic link to the file ``config_in`` when given."""
    home, state = plant(tmp)
    socket = str(tmp / "mcpd.sock")
    daemon = {"socket": socket, "state_dir": str(state), "backoff_base": 0.05, **daemon}
    servers = {
        **servers,
        # An HTTP server whose header secret comes from mcpd's environment (nothing
        # listens there: the secret is what matters).
        "tickets": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Api-Key": "${TICKETS_TOKEN}"}},
    }
    config = (config_dir or tmp) / "mcpd.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    if config_in is not None:
        config_in.parent.mkdir(parents=True, exist_ok=True)
        config.symlink_to(config_in)
    config.write_text(toml(daemon, servers, extra))
    env = {**os.environ, "HOME": str(home), "TICKETS_TOKEN": SECRET}
    named = str(config)
    if cwd is not None:
        named = os.path.relpath(config, cwd)
        env["PYTHONPATH"] = str(ROOT)  # the mcpd under test, wherever it runs
    log = tmp / "mcpd.log"
    proc = subprocess.Popen(
        [*wrap, sys.executable, "-m", "mcpd", "serve", "--config", named, "--log", "stderr"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )
    listening = threading.Event()
    served = Served(proc, socket, log, home, config)
    copier = threading.Thread(
        target=_copy, args=(proc, log, listening, served.written), daemon=True
    )
    copier.start()
    try:
        listening.wait(timeout=60)
        if not listening.is_set():
            raise AssertionError(f"mcpd did not get going:\n{served.log()}")
        yield served
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        copier.join(timeout=10)


def _copy(
    proc: subprocess.Popen[str], log: Path, listening: threading.Event, written: threading.Condition
) -> None:
    """mcpd's log into a file the test reads; ``listening`` set once it serves, and
    ``written`` told of each line."""
    assert proc.stderr is not None
    with open(log, "w") as out:
        for line in proc.stderr:
            out.write(line)
            out.flush()
            with written:
                written.notify_all()
            if "listening on " in line:
                listening.set()
    listening.set()
    with written:
        written.notify_all()


def text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


def pids_max(pid: int) -> Path:
    """The ``pids.max`` of the pids cgroup the host's process ``pid`` is in."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            return Path("/sys/fs/cgroup/pids", path.lstrip("/"), "pids.max")
    path = next(line.split(":", 2)[2] for line in lines if line.startswith("0::"))
    return Path("/sys/fs/cgroup", path.lstrip("/"), "pids.max")


@contextlib.asynccontextmanager
async def agent_of(served: Served) -> AsyncIterator[Agent]:
    async with connect(served.socket) as agent:
        yield agent


async def wait_ready(agent: Agent, *aliases: str, timeout: float = 30) -> None:
    with trio.fail_after(timeout):
        while True:
            rows = {s["alias"]: s for s in (await agent.result("mcpd/status"))["servers"]}
            if all(rows.get(a, {}).get("state") == "ready" for a in aliases):
                return
            await trio.sleep(0.05)


async def call(agent: Agent, alias: str, tool: str, **arguments: object) -> str:
    """The text the server ``alias``'s ``tool`` answers with."""
    return text(await agent.call(f"mcp__{alias}__{tool}", arguments))


async def settled(served: Served, alias: str) -> dict[str, Any]:
    """The status once the server ``alias`` is ready or has failed to start."""
    with trio.fail_after(30):
        while True:
            rows = await served.status()
            if rows[alias]["state"] == "ready" or rows[alias]["last_error"]:
                return rows
            await trio.sleep(0.05)


async def started_again(served: Served, agent: Agent, alias: str) -> dict[str, Any]:
    """The hostile server ``alias`` made to exit; its status once mcpd has started it
    again, or has refused to."""
    before = (await served.status())[alias]["restarts"]
    await agent.call(f"mcp__{alias}__quit", {})  # an error: it dies mid-call
    with trio.fail_after(30):
        while True:
            row = (await served.status())[alias]
            if "cannot start in its sandbox" in (row["last_error"] or ""):
                return row
            # Serving again, though lately failed: degraded, not ready.
            if row["state"] in ("ready", "degraded") and row["restarts"] > before:
                return row
            await trio.sleep(0.05)


async def restarted(served: Served, agent: Agent, alias: str = "hostile") -> None:
    """The hostile server ``alias`` made to exit, and started again by mcpd: serving
    again, which the call it died in shows as ``degraded`` for ``stable_after``."""
    before = (await served.status())[alias]["restarts"]
    await agent.call(f"mcp__{alias}__quit", {})  # an error: it dies mid-call
    with trio.fail_after(30):
        while True:
            row = (await served.status())[alias]
            if row["state"] in ("ready", "degraded") and row["restarts"] > before:
                return
            await trio.sleep(0.05)


async def added(served: Served, agent: Agent, alias: str, body: dict[str, Any]) -> None:
    """The server ``alias`` added to the config, reloaded, and ready."""
    table = toml({}, {alias: body}).removeprefix("[daemon]\n")
    served.config.write_text(served.config.read_text() + table)
    assert (await agent.result("mcpd/reload"))["added"] == [alias]
    await wait_ready(agent, alias)


async def untouched(served: Served, agent: Agent, before: dict[str, Any]) -> None:
    """mcpd still runs, the hostile server's ordinary tool answers, and the steady
    server is the same process it was, never restarted, and answers."""
    assert served.proc.poll() is None and alive(served.pid)
    assert text(await agent.call("mcp__hostile__echo", {"text": "still"})) == "ok: echo still"
    assert text(await agent.call("mcp__steady__tool0", {"text": "a"})) == "tool0:a"
    rows = await served.status()
    assert rows["steady"]["pid"] == before["steady"]["pid"]
    assert rows["steady"]["restarts"] == 0
    assert rows["hostile"]["restarts"] == before["hostile"]["restarts"]
