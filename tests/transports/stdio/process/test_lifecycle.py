"""A stdio server's process: why it could not start, how it ended, and its stop,
which takes its whole process group."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import msgspec
import pytest
import trio

from tests.support.daemons.sandboxed import HOSTILE
from tests.support.system import bubblewrap
from tests.support.system.procs import alive, read_pid, wait_gone
from transports.errors import SpawnError
from transports.stdio.process.childenv import environment
from transports.stdio.process.exits import describe_exit
from transports.stdio.process.lifecycle import start, stop_process
from transports.stdio.sandbox import host
from transports.stdio.sandbox.plan import Sandbox


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


@pytest.mark.parametrize(
    ("args", "env", "why"),
    [
        (["a\0b"], {}, "embedded null byte"),
        ([], {"A=B": "1"}, "illegal environment variable name"),
        (["\ud800"], {}, "surrogates not allowed"),
    ],
)
def test_a_command_line_the_system_cannot_take_is_a_start_that_fails_saying_why(
    args: list[str], env: dict[str, str], why: str
) -> None:
    with pytest.raises(SpawnError) as caught:
        start("s", [sys.executable, *args], {**environment(True, None), **env}, None)
    assert caught.value.reason.startswith(f"s: cannot start {sys.executable!r}: ")
    assert why in caught.value.reason


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
    machine = msgspec.structs.replace(host.probe(), userns_denial=old)
    monkeypatch.setattr(host, "_machine", [machine])
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


async def test_bubblewraps_command_line_shows_the_server_and_nothing_of_its_sandbox(
    tmp_path: Path,
) -> None:
    """Every user of the machine can read a process's command line: bubblewrap's shows
    `--args FD` and the server's own command, not what the sandbox hides or where the
    home is, and the sandbox is still applied. The descriptor stays with bubblewrap."""
    bubblewrap.require()
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "token").write_text("s3cret")
    home = tmp_path / "homes" / "s"
    sandbox = Sandbox(home=str(home), hide=(str(secrets),), alias="s", where="servers.s")
    code = (
        "import json, os, sys\n"
        "fds = []\n"
        "for f in os.listdir('/proc/self/fd'):\n"
        "    try:\n"
        "        fds.append(os.readlink(f'/proc/self/fd/{f}'))\n"
        "    except OSError:\n"
        "        pass  # the one listdir read the directory with\n"
        f"print(json.dumps({{'hidden': os.listdir({str(secrets)!r}), 'fds': fds}}), flush=True)\n"
        "sys.stdin.read()\n"
    )
    argv = [sys.executable, "-c", code]
    proc = start("s", argv, environment(True, None), None, sandbox)
    try:
        assert proc.wrapped and proc.stdout is not None
        out = b""
        with trio.fail_after(20):
            while not out.endswith(b"\n"):
                chunk = await proc.stdout.receive_some()
                assert chunk, await proc.stderr.receive_some()  # type: ignore[union-attr]
                out += chunk
        seen = json.loads(out)
        assert seen["hidden"] == []  # applied
        assert not any("mcpd-sandbox-args" in target for target in seen["fds"]), seen
        # bubblewrap, and its child that is the first process of the sandbox's PID namespace.
        inner = int(Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()[0])
        for pid in (proc.pid, inner):
            shown = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
            fd = shown[2]
            assert shown[0].endswith("/bwrap") and fd.isdigit(), shown
            assert shown[1:] == ["--args", fd, "--", *argv], shown
        await stop_process(proc, "s", stdin_grace=5, term_grace=5)
    finally:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
