"""A stdio server's process: starting it (or taking the one started early), describing
its exit, and stopping it with everything in its process group."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
from collections.abc import Sequence

import trio

from protocol.logfields import log_extra

from . import early
from .base import SpawnError
from .process import ChildProcess, adopt, signal_group, spawn

logger = logging.getLogger("mcpd.stdio")


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "is still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


def start(
    alias: str,
    argv: Sequence[str],
    env: dict[str, str],
    cwd: str | None,
) -> ChildProcess:
    started = early.take(argv, env, cwd)
    if started is not None:
        return adopt(started)
    try:
        return spawn(argv, env=env, cwd=cwd)
    except OSError as exc:
        raise _spawn_error(alias, argv[0], cwd, exc) from None


def _spawn_error(alias: str, command: str, cwd: str | None, exc: OSError) -> SpawnError:
    what = f"{alias}: cannot start {command!r}"
    if isinstance(exc, FileNotFoundError):
        if cwd and not os.path.isdir(cwd):
            return SpawnError(f"{what}: working directory {cwd!r} not found")
        return SpawnError(f"{what}: command not found")
    if isinstance(exc, PermissionError):
        return SpawnError(f"{what}: permission denied (not executable?)")
    return SpawnError(f"{what}: {exc.strerror or exc}")


async def stop_process(
    proc: ChildProcess, alias: str, *, stdin_grace: float, term_grace: float
) -> None:
    """Close stdin, wait, SIGTERM the group, wait, SIGKILL the group."""
    with contextlib.suppress(Exception):
        await proc.stdin.aclose()  # type: ignore[union-attr]
    with trio.move_on_after(stdin_grace):
        await proc.wait()
    if proc.returncode is None:
        signal_group(proc.pid, signal.SIGTERM)
        with trio.move_on_after(term_grace):
            await proc.wait()
    if proc.returncode is None:
        logger.warning(
            "%s: still running %g s after SIGTERM; sending SIGKILL to its process group",
            alias,
            term_grace,
            extra=log_extra(alias, reason="ignored SIGTERM"),
        )
    # Also after a clean exit: whatever the server left in its group goes too.
    signal_group(proc.pid, signal.SIGKILL)
    with trio.move_on_after(term_grace):
        await proc.wait()


async def receive_pipe(stream: trio.lowlevel.FdStream, max_bytes: int) -> bytes:
    """``stream.receive_some`` with one pass through trio's loop per chunk, not two.

    trio's pipe read yields before it tries the read, and then waits for the pipe
    when it finds nothing: two passes for each answer of a server that answers one
    request at a time. This tries first and waits only when there is nothing, as
    trio's sockets do; a read that finds data at once still yields (without losing
    the data to a cancellation), so a server flooding stdout cannot starve the rest.
    """
    fd = stream.fileno()
    try:
        data = os.read(fd, max_bytes)
    except BlockingIOError:
        pass
    except OSError as exc:
        raise _pipe_error(exc) from None
    else:
        await trio.lowlevel.cancel_shielded_checkpoint()
        return data
    while True:
        await trio.lowlevel.wait_readable(fd)
        try:
            return os.read(fd, max_bytes)
        except BlockingIOError:
            continue
        except OSError as exc:
            raise _pipe_error(exc) from None


def _pipe_error(exc: OSError) -> trio.BrokenResourceError | trio.ClosedResourceError:
    if exc.errno == errno.EBADF:
        return trio.ClosedResourceError("the pipe was already closed")
    return trio.BrokenResourceError(str(exc))
