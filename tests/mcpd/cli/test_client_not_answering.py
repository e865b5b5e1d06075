"""`mcpd status` (and the other commands that ask something quick) against a daemon
that takes connections and answers nothing (stopped with SIGSTOP, as a wedged one would
be), and against none at all: it says so promptly, `--watch` says so frame after frame,
and `--json` puts the error on stdout as well."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.cli.exits import EXIT_UNREACHABLE
from tests.conftest import ROOT
from tests.support.daemons.served import Served

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # AF_UNIX paths are limited to 107 bytes; pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="mcpd-na-") as d:
        yield Path(d)


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mcpd", *args],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _ended(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode is not None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _mcpd(*args: str) -> subprocess.CompletedProcess[str]:
    return _ended(_start(*args))


def _config(directory: Path) -> str:
    return (
        f'[daemon]\nsocket = "{directory}/mcpd.sock"\nstate_dir = "{directory}/state"\n'
        f'[servers.notes]\ncommand = "{sys.executable}"\nargs = ["-m", "mcpd.demo.notes"]\n'
        'sandbox = "off"\n'
    )


def test_status_of_a_stopped_daemon_says_it_is_not_answering(short_dir: Path) -> None:
    served = Served(short_dir, _config(short_dir))
    sock = str(served.socket)
    watch = None
    asked: list[subprocess.Popen[str]] = []
    try:
        served.notify.next_with("READY=1", timeout=60)
        served.proc.send_signal(signal.SIGSTOP)
        pid = served.proc.pid
        said = f"the process holding {sock} (pid {pid}) is not answering"

        # Each waits out its own time for a reply: they wait at once.
        watch = subprocess.Popen(
            [sys.executable, "-m", "mcpd", "status", "--watch", "0.2", "--socket", sock],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            text=True,
        )
        commands = ("status", "tools", "prompts")
        asked = [_start(command, "--socket", sock) for command in commands]
        asked.append(_start("status", "--json", "--socket", sock))
        for done in map(_ended, asked[:-1]):
            assert done.returncode == EXIT_UNREACHABLE, done
            assert said in done.stderr, done.stderr
            # It is stopped, and the person is told how to let it go on.
            assert f"it is stopped (by a signal, Ctrl-Z or a debugger): `kill -CONT {pid}`" in (
                done.stderr
            ), done.stderr
            # Nothing it said tells it is mcpd: it is named by its pid alone.
            assert "mcpd (pid" not in done.stderr, done.stderr

        done = _ended(asked[-1])
        assert done.returncode == EXIT_UNREACHABLE, done
        error = json.loads(done.stdout)["error"]
        assert error["state"] == "not_answering" and said in error["message"], error

        assert watch.stdout is not None
        frames = 0
        for line in watch.stdout:
            frames += said in line
            if frames == 2:  # it went on after the first
                break
        assert watch.poll() is None
    finally:
        for proc in [*asked, *([watch] if watch is not None else [])]:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        served.proc.send_signal(signal.SIGCONT)
        served.close()


def test_status_json_with_no_daemon_writes_the_error_as_json(short_dir: Path) -> None:
    sock = str(short_dir / "none.sock")
    done = _mcpd("status", "--json", "--socket", sock)
    assert done.returncode == EXIT_UNREACHABLE, done
    error = json.loads(done.stdout)["error"]
    assert error["state"] == "unreachable", error
    assert f'no mcpd is listening on "{sock}"' in error["message"], error
    assert error["message"] in done.stderr
