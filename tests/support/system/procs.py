"""Helpers for tests that watch real processes come and go."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trio

SCRIPTED = str(Path(__file__).parents[1] / "servers" / "scripted.py")
FORGING = str(Path(__file__).parents[1] / "hostile" / "forging_server.py")
TASKS = str(Path(__file__).parents[1] / "asking" / "task_server.py")


def scripted(*flags: str) -> tuple[str, tuple[str, ...]]:
    """(command, args) that run the scripted test server with ``flags``."""
    return sys.executable, (SCRIPTED, *flags)


def forging(*flags: str) -> dict[str, object]:
    """A server entry that runs ``forging_server.py`` with ``flags``."""
    return {"command": sys.executable, "args": [FORGING, *flags]}


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def started_at(pid: int) -> float | None:
    """When ``pid`` started, in seconds of the wall clock (None once it is gone). Pids
    are handed out again once the kernel has gone round them, which on a busy machine
    can happen within a test: a process that started after the one a test meant is
    another."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None
    return _boot_time() + ticks / os.sysconf("SC_CLK_TCK")


def _boot_time() -> float:
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return float(line.split()[1])
    raise OSError("/proc/stat gives no boot time")


# The boot time is in whole seconds, so a start time read here may be late by up to one.
_SAME_START = 1.0


async def wait_gone(pid: int, timeout: float = 10.0, born_by: float | None = None) -> bool:
    """Wait until ``pid`` is gone; the kernel gives no event for a non-child's exit.
    With ``born_by`` (when the process meant was known to run), a process under that
    pid that started later is another, and the one meant is gone."""
    with trio.move_on_after(timeout):
        while still_runs(pid, born_by):
            await trio.sleep(0.02)
        return True
    return False


def still_runs(pid: int, born_by: float | None = None) -> bool:
    """Whether the process meant still runs under ``pid``: one that started after
    ``born_by`` (when the one meant was known to run) is another."""
    if not alive(pid):
        return False
    if born_by is None:
        return True
    start = started_at(pid)
    return start is not None and start <= born_by + _SAME_START


def pid_record(pid: int) -> str:
    """What a test server writes for one of its processes: its pid as it sees it and its
    PID namespace (a sandboxed server's pids are its sandbox's own). The test servers
    copy this rule, since they run without the tests on their path."""
    return f"{pid} {os.readlink('/proc/self/ns/pid')}"


def host_pid(record: str) -> int:
    """The pid, as mcpd and the tests see it, of a process a test server recorded (a
    bare pid, or a ``pid_record``)."""
    pid, _, namespace = record.strip().partition(" ")
    if not namespace or namespace == os.readlink("/proc/self/ns/pid"):
        return int(pid)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/ns/pid") != namespace:
                continue
            with open(f"/proc/{entry}/status") as f:
                nspid = next(line for line in f if line.startswith("NSpid:"))
        except (OSError, StopIteration):
            continue
        if nspid.split()[-1] == pid:
            return int(entry)
    raise ProcessLookupError(f"no process {pid} in {namespace}")


async def read_pid(path: Path, timeout: float = 10.0) -> int:
    with trio.fail_after(timeout):
        while True:
            try:
                text = path.read_text().strip()
            except FileNotFoundError:
                text = ""
            if text:
                return host_pid(text)
            await trio.sleep(0.02)


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def cat_named(folder: Path, name: str) -> Path:
    """A copy of cat, named ``name``: a program whose name /proc will show."""
    program = folder / name
    shutil.copy(shutil.which("cat") or "/bin/cat", program)
    return program


@contextmanager
def reading_stdin(
    program: Path | str, new_session: bool = False
) -> Iterator[subprocess.Popen[bytes]]:
    """``program`` (cat, or a copy) running until the block ends, in a session of its
    own if asked."""
    child = subprocess.Popen(
        [str(program)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=new_session,
    )
    try:
        yield child
    finally:
        child.communicate(b"")
