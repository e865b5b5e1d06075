"""Processes a stdio server started that left its process group: found by the token
in their environment, and stopped; nothing else is touched."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
import trio

from tests.support.system.procs import alive, wait_gone
from transports.stdio.process.launch import START_MARK
from transports.stdio.process.strays import marked_pids, stop_strays

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
# Stays through SIGTERM, as a helper that traps it would.
STUBBORN = [
    sys.executable,
    "-c",
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)",
]
# Never one pid for long: forks, and the parent exits, over and over.
HOPPER = (
    "import os, sys, time\n"
    "print('ready', flush=True)\n"
    "while True:\n"
    "    if os.fork():\n"
    "        os._exit(0)\n"
    "    time.sleep(float(sys.argv[1]))"
)
# The init of the PID namespace the hopper runs in: it starts the hopper with the token
# (carrying none itself, so the scan cannot end the test by killing it), reaps what the
# hopper leaves, and exits once nothing of it is left, which ends the namespace.
NAMESPACE_INIT = (
    "import os, subprocess, sys\n"
    "env = dict(os.environ, **{sys.argv[1]: sys.argv[2]})\n"
    "subprocess.Popen([sys.executable, '-c', sys.argv[3], sys.argv[4]], env=env)\n"
    "os.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n"
    "while True:\n"
    "    try:\n"
    "        os.wait()\n"
    "    except ChildProcessError:\n"
    "        break"
)


@contextlib.contextmanager
def started(argv: list[str], token: str | None) -> Iterator[subprocess.Popen[bytes]]:
    env = dict(os.environ)
    if token is not None:
        env[START_MARK] = token
    proc = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.PIPE)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


async def test_a_process_carrying_the_token_is_stopped_and_no_other() -> None:
    token = secrets.token_hex(8)
    with (
        started(SLEEPER, token) as stray,
        started(SLEEPER, secrets.token_hex(8)) as another_servers,
        started(SLEEPER, None) as unmarked,
    ):
        assert marked_pids(token, group=0) == [stray.pid]
        with trio.fail_after(20):
            await stop_strays("s", token, group=0, grace=5)
            assert await wait_gone(stray.pid)
        assert alive(another_servers.pid) and alive(unmarked.pid)


async def test_the_servers_own_group_is_left_to_its_own_kill() -> None:
    token = secrets.token_hex(8)
    with started(SLEEPER, token) as member:
        assert marked_pids(token, group=os.getpgid(member.pid)) == []


async def test_one_that_ignores_sigterm_is_killed_after_the_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = secrets.token_hex(8)
    with started(STUBBORN, token) as stray:
        assert stray.stdout is not None
        assert stray.stdout.readline() == b"ready\n"  # its SIGTERM handler is in place
        with trio.fail_after(20):
            await stop_strays("s", token, group=0, grace=0.2)
        assert stray.wait() == -signal.SIGKILL
    assert "1 process(es) it started had left its process group" in caplog.text


async def test_no_token_no_scan() -> None:
    with started(SLEEPER, "") as unmarked:
        await stop_strays("s", "", group=0, grace=1)
        assert alive(unmarked.pid)


@contextlib.contextmanager
def hopping(pause: str, token: str) -> Iterator[subprocess.Popen[bytes]]:
    """The hopper in a PID namespace of its own, which ends, and every hopper with it,
    when the test does, however it ends: the namespace's init dies with ``unshare``,
    and ``unshare`` with the test's process."""
    argv = ["setpriv", "--pdeathsig", "KILL", "unshare", "--pid", "--fork", "--kill-child"]
    if os.geteuid() != 0:
        argv.append("--map-root-user")
    argv += [sys.executable, "-c", NAMESPACE_INIT, START_MARK, token, HOPPER, pause]
    proc = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.PIPE)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


@pytest.mark.parametrize("pause", ["0.02", "0.001"])
async def test_one_that_keeps_forking_is_stopped_too(pause: str) -> None:
    token = secrets.token_hex(8)
    with hopping(pause, token) as namespace:
        assert namespace.stdout is not None
        assert namespace.stdout.readline() == b"ready\n"
        with trio.fail_after(30):
            await stop_strays("s", token, group=0, grace=1)
        # Its namespace ends only once no hopper is left in it.
        with trio.fail_after(10):
            code = await trio.to_thread.run_sync(namespace.wait, abandon_on_cancel=True)
        assert code == 0
