"""A stdio server's process: why it could not start, how it ended, and its stop,
which takes its whole process group."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import msgspec
import pytest
import trio

from tests.support import bubblewrap
from tests.support.procs import alive, read_pid, wait_gone
from tests.support.sandbox import HOSTILE
from transports.errors import SpawnError
from transports.stdio import sandbox_host
from transports.stdio.childenv import environment
from transports.stdio.exits import describe_exit
from transports.stdio.process import start, stop_process
from transports.stdio.sandbox import Sandbox


def test_an_exit_is_told_in_words() -> None:
    assert describe_exit(None) == "is still running"
    assert describe_exit(0) == "exited with status 0"
    assert describe_exit(3) == "exited with status 3"
    assert describe_exit(-signal.SIGKILL) == "was killed by SIGKILL"
    assert describe_exit(-200) == "was killed by signal 200"


@pytest.mark.parametrize(
    ("argv", "cwd", "why"),
    [
        (["no-such-command-here"], None, "command not found"),
        ([sys.executable], "/no/such/dir", "working directory '/no/such/dir' not found"),
    ],
)
def test_a_server_that_cannot_start_says_why(argv: list[str], cwd: str | None, why: str) -> None:
    with pytest.raises(SpawnError) as caught:
        start("s", argv, environment(True, None), cwd)
    assert caught.value.reason == f"s: cannot start {argv[0]!r}: {why}"


def test_a_command_that_is_not_executable_says_so(tmp_path: Path) -> None:
    script = tmp_path / "server"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(SpawnError, match="permission denied"):
        start("s", [str(script)], environment(True, None), None)


async def test_the_stop_takes_the_whole_group_even_after_a_clean_exit(tmp_path: Path) -> None:
    # The server exits as its stdin closes; a helper it left in its group is killed too.
    pidfile = tmp_path / "helper"
    code = (
        "import os, subprocess, sys\n"
        "helper = subprocess.Popen(['sleep', '60'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(helper.pid))\n"
        "sys.stdin.read()\n"
    )
    proc = start("s", [sys.executable, "-c", code], environment(True, None), None)
    try:
        with trio.fail_after(20):
            helper = await read_pid(pidfile)
            await stop_process(proc, "s", stdin_grace=5, term_grace=5)
            assert proc.returncode == 0
            assert await wait_gone(helper)
    finally:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert not alive(helper)


async def test_a_server_in_bubblewrap_without_part_of_its_sandbox_still_gets_its_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part it goes without (here, bubblewrap too old to refuse it user namespaces) is
    said, and the rest of its sandbox is kept, stop included: the SIGTERM goes to the
    server, not to bubblewrap, whose end would take the server with it at once."""
    bubblewrap.require()
    old = "bwrap: Unknown option --disable-userns"
    machine = msgspec.structs.replace(sandbox_host.probe(), userns_denial=old)
    monkeypatch.setattr(sandbox_host, "_machine", [machine])
    mark = tmp_path / "mark"
    sandbox = Sandbox(home=str(tmp_path / "home"), alias="s", where="servers.s")
    argv = [sys.executable, HOSTILE, "--on-term", str(mark)]
    proc = start("s", argv, environment(True, None), None, sandbox)
    try:
        assert proc.unprotected is not None and old in proc.unprotected
        await stop_process(proc, "s", stdin_grace=0.5, term_grace=20)
    finally:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert mark.read_text() == "terminated"
