"""A reload binds the sockets of the profiles it adds or moves before it starts any
server: a server the reload adds that tries to take such a path as it starts finds it
mcpd's, whatever the order the two would otherwise run in; and a reload whose new
profile socket cannot be bound is refused whole, naming the key, as a config error is
(``mcpd reload`` exits 78), with nothing of it applied."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from mcpd.config.loading.load import load
from mcpd.config.tables.model import CONFIG_ERROR
from tests.conftest import ROOT
from tests.support.clients.agent import connect, running
from tests.support.system.procs import SCRIPTED, alive, read_pid, scripted

pytestmark = pytest.mark.timeout(90)

SQUATTER = str(Path(SCRIPTED).parents[1] / "breakout" / "squatter.py")


def server(*args: str) -> str:
    command, rest = scripted(*args)
    return f"command = {json.dumps(command)}\nargs = {json.dumps(list(rest))}\n"


def write_config(path: Path, tmp_path: Path, extra: str = "") -> None:
    path.write_text(
        f'[daemon]\nsocket = "{tmp_path / "mcpd.sock"}"\nbackoff_base = 0.05\n'
        f"[servers.a]\n{server('--pid-file', str(tmp_path / 'a.pid'), '--tools', '1')}" + extra
    )


async def test_a_server_the_reload_adds_finds_the_new_profile_socket_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_path = tmp_path / "mcpd.toml"
    work = tmp_path / "work.sock"
    notes = tmp_path / "squatter.notes"
    write_config(config_path, tmp_path)
    squat = [SQUATTER, str(notes), f"unix:{work}", "--", "--tools", "2"]
    with trio.fail_after(60):
        async with running(load(config_path), str(config_path)) as daemon:
            # The server is let win any race it could: what the reload does to the
            # profiles' sockets once it has started its servers waits until they have
            # had their first start (the squatter's binding done).
            served_after_start = daemon.agent_server.apply_sockets

            async def once_the_servers_started() -> None:
                await daemon.supervisor.wait_started(trio.current_time() + 30)
                await served_after_start()

            monkeypatch.setattr(daemon.agent_server, "apply_sockets", once_the_servers_started)
            write_config(
                config_path,
                tmp_path,
                f'[servers.squat]\ncommand = "{sys.executable}"\nargs = {json.dumps(squat)}\n'
                f'[profiles.work]\nservers = ["a"]\nsocket = "{work}"\n',
            )
            async with connect(str(tmp_path / "mcpd.sock")) as operator:
                report = await operator.result("mcpd/reload")
            assert report["added"] == ["squat"]
            assert notes.read_text().splitlines() == [f"unix:{work} refused EADDRINUSE"]
            async with connect(str(work)) as agent:
                assert [t["name"] for t in await agent.tools()] == ["mcp__a__tool0"]


async def test_a_reload_whose_profile_socket_is_taken_is_refused_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config_path = tmp_path / "mcpd.toml"
    taken = tmp_path / "taken.sock"
    write_config(config_path, tmp_path)
    # Another process listens where the new profile's socket would go.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket, sys\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            f"s.bind({str(taken)!r}); s.listen()\n"
            "print('listening', flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "listening\n"
        with trio.fail_after(60):
            async with (
                running(load(config_path), str(config_path)) as daemon,
                connect(str(tmp_path / "mcpd.sock")) as operator,
            ):
                first = await read_pid(tmp_path / "a.pid")
                write_config(
                    config_path,
                    tmp_path,
                    f"[servers.b]\n{server('--pid-file', str(tmp_path / 'b.pid'))}"
                    f'[profiles.work]\nsocket = "{taken}"\n',
                )
                with caplog.at_level(logging.ERROR, "mcpd"):
                    reply = await operator.rpc("mcpd/reload")
                said = reply["error"]["data"][CONFIG_ERROR]
                assert said.startswith("profiles.work.socket: ")
                assert str(taken) in said
                assert reply["error"]["message"] == f"config rejected: {said}"
                assert any(
                    r.getMessage().startswith("reload rejected, keeping the running config")
                    for r in caplog.records
                )
                # Nothing of the reload is in force: no server added, no profile.
                assert sorted(daemon.supervisor.servers) == ["a"]
                assert not (tmp_path / "b.pid").exists()
                assert (
                    list(daemon.config.profiles) == [] and daemon.agent_server.sockets.paths() == {}
                )
                assert alive(first)
                # `mcpd reload` says so as it does of any config it is refused.
                done = await trio.run_process(
                    [
                        sys.executable,
                        "-m",
                        "mcpd",
                        "reload",
                        "--socket",
                        str(tmp_path / "mcpd.sock"),
                    ],
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                )
                assert done.returncode == 78, done.stderr
                assert b"profiles.work.socket" in done.stderr
        # The other process's socket is still its own.
        with socket.socket(socket.AF_UNIX) as probe:
            probe.connect(str(taken))
    finally:
        holder.kill()
        holder.wait(timeout=30)


async def test_a_sighup_while_the_daemon_starts_is_applied_once_it_has_started(
    tmp_path: Path,
) -> None:
    """systemd's reload (or a person's kill -HUP) can come before agents are served:
    the reload waits for the start, then adds the new profile and its socket."""
    from mcpd.daemon import Daemon

    config_path = tmp_path / "mcpd.toml"
    pid = tmp_path / "a.pid"
    slow = server("--pid-file", str(pid), "--tools", "1", "--start-delay", "1")
    config_path.write_text(
        f'[daemon]\nsocket = "{tmp_path / "mcpd.sock"}"\nbackoff_base = 0.05\n[servers.a]\n{slow}'
    )
    work = tmp_path / "work.sock"
    daemon = Daemon(load(config_path), config_path=str(config_path))
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(daemon.run)
            await read_pid(pid)  # the server has started, and not yet answered
            while signal.getsignal(signal.SIGHUP) is signal.SIG_DFL:
                await trio.sleep(0.01)  # the daemon's signal receiver is open
            assert not daemon.started.is_set()
            config_path.write_text(
                config_path.read_text() + f'[profiles.work]\nsocket = "{work}"\nservers = ["a"]\n'
            )
            os.kill(os.getpid(), signal.SIGHUP)
            await daemon.started.wait()
            while "work" not in daemon.config.profiles or not work.exists():
                await trio.sleep(0.02)
            async with connect(str(work)) as agent:
                assert [t["name"] for t in await agent.tools()] == ["mcp__a__tool0"]
            daemon.stop()


class Said(logging.Handler):
    """Sets ``event`` once a record holding ``text`` is logged."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.event = trio.Event()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.records.append(record)
            self.event.set()


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (PermissionError(13, "Permission denied"), "reload rejected, keeping the running"),
        (RuntimeError("unforeseen"), "reload failed (RuntimeError): a fault in mcpd"),
    ],
    ids=["refused by the system", "a fault"],
)
async def test_a_sighup_reload_that_fails_binding_a_profile_socket_leaves_the_daemon_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: Exception, said: str
) -> None:
    config_path = tmp_path / "mcpd.toml"
    write_config(config_path, tmp_path)
    work = tmp_path / "work.sock"

    def failing(path: str, mode: int, group: int | None = None) -> None:
        raise fault

    watch = Said(said)
    logging.getLogger("mcpd").addHandler(watch)
    try:
        with trio.fail_after(60):
            async with running(load(config_path), str(config_path)) as daemon:
                monkeypatch.setattr("mcpd.agents.entry.sockets.bind_unix", failing)
                write_config(
                    config_path, tmp_path, f'[profiles.work]\nservers = ["a"]\nsocket = "{work}"\n'
                )
                os.kill(os.getpid(), signal.SIGHUP)
                await watch.event.wait()
                assert list(daemon.config.profiles) == [] and not work.exists()
                async with connect(str(tmp_path / "mcpd.sock")) as agent:
                    assert [t["name"] for t in await agent.tools()] == ["mcp__a__tool0"]
                    monkeypatch.undo()
                    report = await agent.result("mcpd/reload")
                assert report["settings"] == ["profiles"]
                async with connect(str(work)) as agent:
                    assert [t["name"] for t in await agent.tools()] == ["mcp__a__tool0"]
    finally:
        logging.getLogger("mcpd").removeHandler(watch)
    (record,) = watch.records
    if isinstance(fault, OSError):
        assert record.getMessage().endswith(
            f"profiles.work.socket: cannot listen on {str(work)!r}: Permission denied"
        )
    else:
        assert record.exc_info is not None and record.exc_info[1] is fault
