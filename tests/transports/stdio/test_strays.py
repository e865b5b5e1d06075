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

from tests.support.procs import alive, wait_gone
from transports.stdio.launch import START_MARK
from transports.stdio.strays import marked, stop_strays

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
# Never one pid for long: forks, and the parent exits, over and over; each holds the
# pipe on its stdout, which ends when the last of them is gone.
HOPPER = [
    sys.executable,
    "-c",
    "import os, sys, time\n"
    "print('ready', flush=True)\n"
    "while True:\n"
    "    if os.fork():\n"
    "        os._exit(0)\n"
    "    time.sleep(float(sys.argv[1]))",
]


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
        assert marked(token, group=0) == [stray.pid]
        with trio.fail_after(20):
            await stop_strays("s", token, group=0, grace=5)
            assert await wait_gone(stray.pid)
        assert alive(another_servers.pid) and alive(unmarked.pid)


async def test_the_servers_own_group_is_left_to_its_own_kill() -> None:
    token = secrets.token_hex(8)
    with started(SLEEPER, token) as member:
        assert marked(token, group=os.getpgid(member.pid)) == []


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


def kill_all(token: str) -> None:
    """Whatever carries ``token``, however fast it forks (what the test leaves behind
    when it fails)."""
    for _ in range(200):
        pids = marked(token, group=0)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("pause", ["0.02", "0.001"])
async def test_one_that_keeps_forking_is_stopped_too(pause: str) -> None:
    token = secrets.token_hex(8)
    try:
        with started([*HOPPER, pause], token) as stray:
            assert stray.stdout is not None
            assert stray.stdout.readline() == b"ready\n"
            with trio.fail_after(30):
                await stop_strays("s", token, group=0, grace=1)
            # Its pipe ends: none of them holds it any more.
            with trio.fail_after(10):
                await trio.lowlevel.wait_readable(stray.stdout)
            assert stray.stdout.read() == b""
    finally:
        kill_all(token)
