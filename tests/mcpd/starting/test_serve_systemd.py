"""`mcpd serve` as systemd starts it, without systemd: the notify socket is a datagram
socket of the test's, a passed listening socket stands in for mcpd.socket, and
$RUNTIME_DIRECTORY for the unit's RuntimeDirectory=. Real processes, no root needed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from mcpd.agents.entry.places import OWNER_RESERVE
from mcpd.cli.client import Client
from mcpd.config.tables.model import CONFIG_ERROR
from mcpd.reloading.outcome import ReloadReport
from protocol.jsonrpc import messages as rpc
from tests.conftest import ROOT
from tests.support.daemons.notify import Notifications
from tests.support.system import bubblewrap

pytestmark = pytest.mark.timeout(60)

# Puts the passed socket at fd 3 and sets LISTEN_PID to its own pid before it becomes
# `mcpd serve` (exec keeps the pid), as systemd does for a socket-activated service.
# With $NOFILE, it also lowers its limit of open files (RLIMIT_NOFILE) to that.
_ACTIVATE = """\
import os, resource, sys
fd = int(sys.argv[1])
nofile = int(os.environ.pop("NOFILE", "0"))
if nofile:
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
if fd >= 0:
    os.dup2(fd, 3)
    os.close(fd)
    os.environ.update(LISTEN_FDS="1", LISTEN_PID=str(os.getpid()), LISTEN_FDNAMES="api")
os.execv(sys.executable, [sys.executable, "-m", "mcpd", "serve", *sys.argv[2:]])
"""

SERVER = '[servers.{alias}]\ncommand = "{python}"\nargs = ["-m", "mcpd.demo.{module}"]\n'


def _server(alias: str, module: str = "notes") -> str:
    return SERVER.format(alias=alias, python=sys.executable, module=module)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # AF_UNIX paths are limited to 107 bytes; pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="mcpd-ss-") as d:
        yield Path(d)


def _serve(
    config: Path, notify: Notifications, *, passed: socket.socket | None = None, **env: str
) -> subprocess.Popen[str]:
    fds = (passed.fileno(),) if passed is not None else ()
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _ACTIVATE,
            str(fds[0] if fds else -1),
            "--config",
            str(config),
            "--log",
            "stderr",
        ],
        pass_fds=fds,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NOTIFY_SOCKET": notify.path, **env},
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _listening(path: Path) -> socket.socket:
    """A listening socket as systemd's mcpd.socket would pass it."""
    passed = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    passed.bind(str(path))
    passed.listen()
    return passed


def _stop(proc: subprocess.Popen[str], notify: Notifications) -> str:
    proc.send_signal(signal.SIGTERM)
    notify.next_with("STOPPING=1")
    try:
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()
        stderr = proc.communicate()[1]
    return stderr


def _children(pid: int) -> dict[str, int]:
    """The daemon's server processes by demo module name."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(") ", 1)[1].split()[1])
            argv = (stat.parent / "cmdline").read_bytes().decode().split("\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and "-m" in argv:
            found[argv[argv.index("-m") + 1].rsplit(".", 1)[-1]] = int(stat.parent.name)
    return found


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_socket_activated_serve_notifies_ready_status_reload_and_stop(short_dir: Path) -> None:
    config = short_dir / "config.toml"
    config.write_text(_server("notes") + _server("tickets", "tickets"))
    api = short_dir / "api.sock"
    passed = _listening(api)
    notify = Notifications(short_dir / "notify")
    proc = _serve(config, notify, passed=passed, RUNTIME_DIRECTORY=str(short_dir / "rt"))
    passed.close()  # only the daemon holds it now
    try:
        ready = notify.next_with("READY=1")
        assert ready == ["READY=1", "STATUS=2 servers: 2 ready"]
        with Client(str(api)) as client:
            assert len(client.list_tools()) == 6
            assert client.request("mcpd/status")["daemon"]["socket"] == str(api)

        children = _children(proc.pid)
        env = _environ(children["notes"])
        for name in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"):
            assert name not in env, name

        os.kill(children["tickets"], signal.SIGKILL)
        # Every local user reads STATUS=: no server's name in it.
        notify.next_with(
            "STATUS=2 servers: 1 ready, 1 failed (mcpd status and the journal say which)"
        )
        notify.next_with("STATUS=2 servers: 2 ready")

        config.write_text(_server("notes") + _server("tickets", "tickets") + _server("extra"))
        proc.send_signal(signal.SIGHUP)
        reloading = notify.next_with("RELOADING=1")
        assert reloading[1].startswith("MONOTONIC_USEC="), reloading
        # READY=1 comes once the added server has had its first attempt.
        assert notify.next_with("READY=1") == ["READY=1", "STATUS=3 servers: 3 ready"]
        with Client(str(api)) as client:
            assert len(client.list_tools()) == 9
    finally:
        stderr = _stop(proc, notify)
        notify.sock.close()
    assert "listening on " + str(api) in stderr, stderr
    assert "socket path changed" not in stderr, stderr
    assert api.exists(), "the daemon removed a socket systemd owns"
    assert not (short_dir / "rt").exists(), "a passed socket means no socket of our own"


def test_the_directory_of_the_socket_systemd_passes_is_hidden_from_the_servers(
    short_dir: Path,
) -> None:
    """With no RuntimeDirectory= (mcpd.socket makes the directory, root's), mcpd takes
    where it listens from the socket systemd passes, and hides that directory, its
    own, from every sandboxed server."""
    bubblewrap.require()
    # In a directory of its own, hidden whole as the config's: the socket's is another.
    config = short_dir / "conf" / "config.toml"
    config.parent.mkdir()
    config.write_text(_server("notes"))
    (short_dir / "mcpd").mkdir()
    api = short_dir / "mcpd" / "mcpd.sock"
    passed = _listening(api)
    notify = Notifications(short_dir / "notify")
    proc = _serve(config, notify, passed=passed)
    passed.close()
    try:
        notify.next_with("READY=1")
        with Client(str(api)) as client:
            (row,) = client.request("mcpd/status")["servers"]
        assert row["sandbox"]["unprotected"] is None, row
        assert os.listdir(f"/proc/{row['pid']}/root{api.parent}") == []
        assert os.listdir(api.parent) == ["mcpd.sock"]
    finally:
        stderr = _stop(proc, notify)
        notify.sock.close()
    assert f"listening on {api}" in stderr, stderr


def test_the_status_line_turns_ready_as_a_degraded_server_does_with_nothing_happening(
    short_dir: Path,
) -> None:
    """A call fails as its server exits: started again, it shows degraded for
    ``stable_after``, then ready, though no call, probe or restart comes then; the
    status line says so as ``mcpd status`` does."""
    hostile = ROOT / "tests" / "support" / "breakout" / "hostile_server.py"
    config = short_dir / "config.toml"
    config.write_text(
        "[daemon]\nstable_after = 3.0\nhealth_interval = 0\n"
        f'[servers.h]\ncommand = "{sys.executable}"\nargs = ["{hostile}"]\nsandbox = "off"\n'
    )
    runtime = short_dir / "rt"
    runtime.mkdir()
    notify = Notifications(short_dir / "notify")
    proc = _serve(config, notify, RUNTIME_DIRECTORY=str(runtime))
    try:
        assert notify.next_with("READY=1") == ["READY=1", "STATUS=1 server: 1 ready"]
        with Client(str(runtime / "mcpd.sock")) as client:
            failed = client.request("tools/call", {"name": "mcp__h__quit", "arguments": {}})
        assert failed["isError"], failed
        notify.next_with("STATUS=1 server: 1 degraded (mcpd status and the journal say which)")
        notify.next_with("STATUS=1 server: 1 ready", timeout=10)
    finally:
        _stop(proc, notify)
        notify.sock.close()


def test_a_config_socket_that_systemds_replaces_is_warned_of(short_dir: Path) -> None:
    config = short_dir / "config.toml"
    other = short_dir / "other.sock"
    config.write_text(f'[daemon]\nsocket = "{other}"\n' + _server("notes"))
    api = short_dir / "api.sock"
    passed = _listening(api)
    notify = Notifications(short_dir / "notify")
    proc = _serve(config, notify, passed=passed)
    passed.close()
    try:
        notify.next_with("READY=1")
    finally:
        stderr = _stop(proc, notify)
        notify.sock.close()
    # Root's commands look where the config says: the log says where mcpd really is.
    assert f"listening on {api}, the socket systemd passed (mcpd.socket), not on {other}" in (
        stderr
    ), stderr


def test_the_socket_goes_into_the_runtime_directory_replacing_a_stale_one(
    short_dir: Path,
) -> None:
    config = short_dir / "config.toml"
    config.write_text(_server("notes"))
    runtime = short_dir / "rt"
    runtime.mkdir()
    path = runtime / "mcpd.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))  # left behind by a daemon that was killed
    stale.close()
    notify = Notifications(short_dir / "notify")
    proc = _serve(config, notify, RUNTIME_DIRECTORY=f"{runtime}:{short_dir}/other")
    try:
        notify.next_with("READY=1")
        with Client(str(path)) as client:
            assert len(client.list_tools()) == 3
    finally:
        stderr = _stop(proc, notify)
        notify.sock.close()
    assert f"listening on {path}" in stderr, stderr
    assert not path.exists()


def test_a_socket_the_config_names_wins_and_one_that_replaced_ours_is_left_alone(
    short_dir: Path,
) -> None:
    path = short_dir / "own.sock"
    config = short_dir / "config.toml"
    config.write_text(f'[daemon]\nsocket = "{path}"\n' + _server("notes"))
    notify = Notifications(short_dir / "notify")
    proc = _serve(config, notify, RUNTIME_DIRECTORY=str(short_dir))
    newcomer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        notify.next_with("READY=1")
        assert path.exists() and not (short_dir / "mcpd.sock").exists()
        path.unlink()  # say, mcpd.socket was started meanwhile and bound the path
        newcomer.bind(str(path))
        newcomer.listen()
    finally:
        _stop(proc, notify)
        notify.sock.close()
    assert path.exists(), "the daemon removed a socket that was not its own"
    newcomer.close()


def test_a_config_error_under_socket_activation_keeps_the_socket_until_a_reload(
    short_dir: Path,
) -> None:
    """Exiting would have systemd start mcpd again for the waiting connection until it
    gives up on the socket: mcpd stays, answers why it does not serve, and a reload that
    finds a fixed config starts serving on the same socket with the same pid."""
    config = short_dir / "config.toml"
    config.write_text(_server("notes") + "[servers.oops]\ncommand = 5\n")
    api = short_dir / "api.sock"
    passed = _listening(api)
    notify = Notifications(short_dir / "notify")
    proc = _serve(config, notify, passed=passed)
    passed.close()
    try:
        ready = notify.next_with("READY=1")
        assert ready[1] == "STATUS=config error (mcpd status and the journal say what)", ready
        with Client(str(api)) as client:
            with pytest.raises(rpc.RPCError) as refused:
                client.list_tools()
            assert str(config) in refused.value.message
            assert "systemctl reload mcpd" in refused.value.message
            with pytest.raises(rpc.RPCError) as status:
                client.request("mcpd/status")
            assert CONFIG_ERROR in status.value.data
            with pytest.raises(rpc.RPCError) as rejected:
                client.request("mcpd/reload")  # still broken
            assert "servers.oops.command" in rejected.value.data[CONFIG_ERROR]
        assert proc.poll() is None

        config.write_text(_server("notes"))
        with Client(str(api)) as client:
            report = client.request("mcpd/reload")
        # The answer the daemon gives a reload, every field of it.
        every = ReloadReport(added=["notes"], removed=[], changed=[], unchanged=[])
        assert report == msgspec.to_builtins(every), report
        with Client(str(api)) as client:
            assert len(client.list_tools()) == 3
            assert client.request("mcpd/status")["daemon"]["pid"] == proc.pid
    finally:
        stderr = _stop(proc, notify)
        notify.sock.close()
    assert f"config error: {config}: servers.oops.command" in stderr, stderr
    assert "listening on " + str(api) in stderr, stderr


def _holding(short_dir: Path, notify: Notifications, nofile: int) -> subprocess.Popen[str]:
    """``mcpd serve`` socket-activated on ``short_dir/api.sock`` with a config it
    cannot load, at most ``nofile`` files open, once it holds the socket."""
    config = short_dir / "config.toml"
    config.write_text("[servers.oops]\ncomand = 5\n")
    passed = _listening(short_dir / "api.sock")
    proc = _serve(config, notify, passed=passed, NOFILE=str(nofile))
    passed.close()
    notify.next_with("READY=1")
    return proc


def _stop_holding(proc: subprocess.Popen[str]) -> str:
    """Its stderr, once SIGTERM ended it."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    finally:
        proc.kill()
        stderr = proc.communicate()[1]
    return stderr


def _answered(path: Path) -> str:
    """The error a new connection is answered with."""
    with Client(str(path)) as client, pytest.raises(rpc.RPCError) as refused:
        client.list_tools()
    return refused.value.message


def test_a_config_hold_refuses_connections_past_the_limit(short_dir: Path) -> None:
    """The hold keeps the agent sockets' limits: ``max_connections`` and the places
    kept for the owner (the test runs as root), whoever says nothing on them."""
    notify = Notifications(short_dir / "notify")
    proc = _holding(short_dir, notify, 1024)
    api = short_dir / "api.sock"
    idle: list[socket.socket] = []
    try:
        for _ in range(256 + OWNER_RESERVE):
            idle.append(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            idle[-1].connect(str(api))
        # Accepted after them all, it finds every place taken.
        one_more = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        one_more.connect(str(api))
        with one_more:
            said = one_more.makefile("rb").readline()
        assert b"too many connections (limit 256" in said, said
        idle.pop().close()
        assert "mcpd is not serving" in _answered(api)
    finally:
        for sock in idle:
            sock.close()
        _stop_holding(proc)
        notify.sock.close()


def test_a_config_hold_out_of_descriptors_waits_and_answers_once_they_are_free(
    short_dir: Path,
) -> None:
    notify = Notifications(short_dir / "notify")
    proc = _holding(short_dir, notify, 32)
    api = short_dir / "api.sock"
    assert proc.stderr is not None
    idle: list[socket.socket] = []
    try:
        for _ in range(48):  # more than it can open: the last wait in the backlog
            idle.append(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            idle[-1].connect(str(api))
        for line in proc.stderr:
            if "Too many open files" in line:
                break
        for sock in idle:
            sock.close()
        assert "mcpd is not serving" in _answered(api)
        assert proc.poll() is None
    finally:
        for sock in idle:
            sock.close()
        stderr = _stop_holding(proc)
        notify.sock.close()
    assert "Traceback" not in stderr, stderr
