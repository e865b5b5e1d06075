"""A relative ``command`` (``venv/bin/python``) is taken from the server's working
directory, its ``cwd`` or else its home under the state directory, never from where
mcpd or ``mcpd check-config`` was started: the running daemon starts it from there,
``check-config`` looks for it there too, and both say where they looked when it is
not there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from mcpd.config.loading.load import load
from mcpd.config.sandboxing.per_server import home_of
from tests.support.clients.agent import connect, make_config, running
from tests.support.daemons.supervision import wait_state
from tests.support.system.procs import SCRIPTED

PROGRAM = "venv/bin/python"
ROOT = str(Path(__file__).resolve().parents[4])


def with_python(folder: Path) -> Path:
    """``folder`` holding ``PROGRAM``, a link to this Python, as a checkout's venv does."""
    (folder / "venv" / "bin").mkdir(parents=True)
    (folder / PROGRAM).symlink_to(sys.executable)
    return folder


def not_there(home: str) -> str:
    return (
        f"no such file in its working directory {home} (its home, as it has no cwd), "
        "where a relative command is taken from"
    )


async def test_the_daemon_takes_it_from_the_servers_home_and_says_so_when_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = {"command": PROGRAM, "args": [SCRIPTED]}
    cfg = make_config(tmp_path, {"homed": entry, "missing": entry})
    os.makedirs(home_of("homed", cfg))
    with_python(Path(home_of("homed", cfg)))
    # Where the daemon runs from holds it too: that is no place a server looks in.
    with_python(tmp_path / "here")
    monkeypatch.chdir(tmp_path / "here")
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            await wait_state(agent, "homed", "ready")
            row = await wait_state(agent, "missing", "failed", "crash_loop")
    assert row["last_error"].endswith(
        f"cannot start {PROGRAM!r}: {not_there(home_of('missing', cfg))}"
    ), row["last_error"]


def check_config(config: Path, where: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpd", "check-config", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=where,
        env={**os.environ, "PYTHONPATH": ROOT},
    )


def test_check_config_looks_where_the_daemon_does_not_where_it_is_run(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    config = folder / "mcpd.toml"
    config.write_text(f'[servers.notes]\ncommand = "{PROGRAM}"\nargs = ["{SCRIPTED}"]\n')
    home = home_of("notes", load(str(config)))
    warning = f"warning: servers.notes.command: {PROGRAM!r}: {not_there(home)}; "
    warning += (
        "the server does not start until that is fixed, when mcpd's next try or a reload starts it"
    )
    # Run from a checkout that has it, and from the config's own directory, which
    # does not: neither is where the server starts.
    for where in (with_python(tmp_path / "checkout"), folder):
        out = check_config(config, where)
        assert out.returncode == 0, out.stderr
        assert out.stderr.splitlines() == [warning], out.stderr
        assert "cannot start" in out.stdout
    os.makedirs(home)
    with_python(Path(home))
    out = check_config(config, folder)
    assert (out.returncode, out.stderr) == (0, "")
    assert "cannot start" not in out.stdout


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A directory of the test's own outside /tmp, which every strict sandbox shows."""
    made = Path(tempfile.mkdtemp(prefix="mcpd-test-", dir="/var/tmp"))
    yield made
    shutil.rmtree(made)


def test_check_config_finds_a_strict_servers_command_in_its_home_through_a_linked_state_dir(
    outside_tmp: Path,
) -> None:
    # The daemon starts the server in its home's real path, which its sandbox shows:
    # check-config looks for the command there too, and so finds it shown.
    (outside_tmp / "state").mkdir(mode=0o700)
    (outside_tmp / "linked").symlink_to(outside_tmp / "state")
    (outside_tmp / "conf").mkdir()
    config = outside_tmp / "conf" / "mcpd.toml"
    config.write_text(
        f'[daemon]\nstate_dir = "{outside_tmp / "linked"}"\n'
        '[servers.notes]\ncommand = "./server"\nsandbox = "strict"\n'
    )
    home = Path(home_of("notes", load(str(config))))
    home.mkdir(parents=True, mode=0o700)
    (home / "server").write_text("#!/bin/sh\nexec cat\n")
    (home / "server").chmod(0o755)
    out = check_config(config, outside_tmp)
    assert (out.returncode, out.stderr) == (0, ""), out.stderr
    assert "cannot start" not in out.stdout
