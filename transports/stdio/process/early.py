"""Stdio servers started before the event loop, for their first start to take.

A server that takes a while to start is ready sooner when it starts while mcpd is
still importing trio and the rest of itself, as it would from a host's own launcher.
A start takes an early child only when the command, arguments, environment and
working directory are all equal to its own, so what it gets is exactly what it would
have started; anything else starts as usual, and what nobody took is stopped.

No trio here: see ``launch``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence

from ..sandbox.plan import Starter
from .launch import Launched, launch, signal_group

_Key = tuple[tuple[str, ...], str | None]

_waiting: dict[_Key, list[tuple[dict[str, str], Launched]]] = {}


def launch_early(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str | None,
    join: str | None = None,
    starter: Starter = "main",
    sandbox_args: tuple[int, int] | None = None,
    held: Sequence[int] = (),
) -> int:
    """Start a stdio server now, for a later ``take`` with the same arguments; its pid.
    Raises OSError as ``launch`` does."""
    child = launch(
        argv,
        env=env,
        cwd=cwd,
        join=join,
        starter=starter,
        sandbox_args=sandbox_args,
        held=held,
    )
    _waiting.setdefault(_key(argv, cwd), []).append((dict(env), child))
    return child.popen.pid


def take(argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> Launched | None:
    """The child started early with exactly these arguments, if one is waiting."""
    key = _key(argv, cwd)
    waiting = _waiting.get(key)
    if not waiting:
        return None
    for i, (its_env, child) in enumerate(waiting):
        if its_env == env:
            del waiting[i]
            if not waiting:
                del _waiting[key]
            return child
    return None


def _key(argv: Sequence[str], cwd: str | None) -> _Key:
    # A grant's descriptor is opened afresh for each start (``Plan.held``): the same
    # grant, checked again, under another number.
    words = list(argv)
    for i, word in enumerate(words[:-1]):
        if word in ("--bind-fd", "--ro-bind-fd"):
            words[i + 1] = "FD"
    return (tuple(words), cwd)


def waiting() -> list[int]:
    """The pids of the children started early that no start has taken yet."""
    return [child.popen.pid for entries in _waiting.values() for _, child in entries]


def waiting_marks() -> dict[int, str]:
    """The children started early that no start has taken yet: pid -> start mark."""
    return {child.popen.pid: child.token for entries in _waiting.values() for _, child in entries}


def discard() -> list[int]:
    """Stop every child that no start took, with its process group; their pids."""
    stopped = []
    entries = [child for group in _waiting.values() for _, child in group]
    _waiting.clear()
    for child in entries:
        for fd in (child.stdin, child.stdout, child.stderr):
            if fd >= 0:
                os.close(fd)
        signal_group(child.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.popen.wait(timeout=2)
        stopped.append(child.popen.pid)
    return stopped
