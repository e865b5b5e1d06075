"""Child processes with trio streams for their pipes: how they are started, and why
from the thread running trio, is in ``launch``."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence

import trio

from ...path_identity import PathIdentity
from ..loopback.netns import HostLoopback
from ..sandbox.plan import Sandbox, Starter
from .launch import Launched, launch, resolve_command, signal_group

__all__ = ["ChildProcess", "adopt", "resolve_command", "signal_group", "spawn"]


class ChildProcess:
    """A spawned child with trio streams for its pipes and an async ``wait``."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdin: trio.lowlevel.FdStream | None,
        stdout: trio.lowlevel.FdStream | None,
        stderr: trio.lowlevel.FdStream | None,
        token: str = "",
        started: float | None = None,
    ) -> None:
        self._popen = popen
        # On ``time.monotonic``: its start, and when its exit was first seen. An exit
        # status cannot say how long a process ran; these bound it from above.
        self.started = time.monotonic() if started is None else started
        self.exit_seen: float | None = None
        # What its descendants carry in their environment (launch.START_MARK).
        self.token = token
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self._wait_lock = trio.Lock()
        # The sandbox it was started in (None: none), whether bubblewrap runs it (its
        # exit status then tells a signal as 128 + N), and what of the sandbox could
        # not be applied.
        self.sandbox: Sandbox | None = None
        self.wrapped = False
        self.unprotected: str | None = None
        self.covered: tuple[PathIdentity, ...] = ()  # ``Plan.covered``
        self.join: str | None = None  # the cgroup it joined (``pidgroup``)
        # The forks that cgroup had refused before it started: the cgroup of a server
        # whose last start left processes behind is kept, with its count.
        self.refused_before = 0
        # Its namespace and listeners for the host ports it may reach (``loopback.netns``).
        self.host_loopback: HostLoopback | None = None

    @property
    def pid(self) -> int:
        return self._popen.pid

    def command_pid(self) -> int:
        """The pid of the command itself: in a sandbox, bubblewrap's child (the PID
        namespace's init) runs it as its own child; else ``pid``."""
        if not self.wrapped:
            return self.pid
        pid = self.pid
        for _ in range(2):
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as f:
                    children = f.read().split()
            except OSError:
                return self.pid
            if not children:
                return self.pid
            pid = int(children[0])
        return pid

    @property
    def returncode(self) -> int | None:
        return self._seen(self._popen.poll())

    @property
    def lived(self) -> float | None:
        """Seconds from its start until its exit was seen (None: not seen yet)."""
        return None if self.exit_seen is None else self.exit_seen - self.started

    async def wait(self) -> int:
        async with self._wait_lock:
            if self._popen.poll() is None:
                await _wait_exit(self._popen)
            code = self._popen.wait()
            self._seen(code)
            return code

    def _seen(self, code: int | None) -> int | None:
        if code is not None and self.exit_seen is None:
            self.exit_seen = time.monotonic()
        return code


async def _wait_exit(popen: subprocess.Popen[bytes]) -> None:
    try:
        pidfd = os.pidfd_open(popen.pid)
    except (AttributeError, OSError):
        # No pidfd (old kernel): a thread blocks in waitpid instead.
        await trio.to_thread.run_sync(popen.wait, abandon_on_cancel=True)
        return
    try:
        await trio.lowlevel.wait_readable(pidfd)
    finally:
        os.close(pidfd)


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stdin: bool = True,
    stderr: bool = True,
    join: str | None = None,
    starter: Starter = "main",
    sandbox_args: tuple[int, int] | None = None,
    held: Sequence[int] = (),
) -> ChildProcess:
    """Start ``argv`` in its own session and process group, killed if mcpd dies (in the
    cgroup ``join`` names, if given; from the thread ``starter`` names; bubblewrap's
    arguments, at ``sandbox_args``, off its command line: ``transports.stdio.process.launch``).

    Synchronous on purpose: see ``launch``. Raises OSError when the
    command cannot be started.
    """
    return adopt(
        launch(
            argv,
            env=env,
            cwd=cwd,
            stdin=stdin,
            stderr=stderr,
            join=join,
            starter=starter,
            sandbox_args=sandbox_args,
            held=held,
        )
    )


def adopt(child: Launched) -> ChildProcess:
    """A launched child with its pipes as trio streams."""
    stdin, stdout, stderr = (
        trio.lowlevel.FdStream(fd) if fd >= 0 else None
        for fd in (child.stdin, child.stdout, child.stderr)
    )
    return ChildProcess(child.popen, stdin, stdout, stderr, child.token, child.started)
