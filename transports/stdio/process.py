"""A stdio server's process: starting it (or taking the one started early), describing
its exit, and stopping it with everything in its process group."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Sequence

import trio

from protocol.logfields import log_extra

from ..errors import SpawnError
from . import early
from .child import ChildProcess, adopt, signal_group, spawn

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
