"""Why a stdio server's process ended, in words, naming the limit it ran into.

A process that reaches a limit is told by the kernel in one of two ways: a signal
(SIGXCPU at its CPU time limit) or a failed call (an allocation, a fork, an open),
which its runtime usually reports on stderr as it dies. The first is certain; the
second is read from the last lines of stderr, and said only for a limit in force.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from typing import Final

from .limits import Limits

# What runtimes write when a call failed at a limit (lower case).
_SAYS: Final = {
    "memory": (
        "memoryerror",
        "out of memory",
        "cannot allocate memory",
        "bad_alloc",
        "allocation failed",
        "enomem",
    ),
    "processes": (
        "resource temporarily unavailable",
        "eagain",
        "cannot fork",
        "can't fork",
        "fork: retry",
        "blockingioerror",
    ),
    "open_files": ("too many open files", "emfile"),
}


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def describe_exit(returncode: int | None, *, sandboxed: bool = False) -> str:
    if returncode is None:
        return "is still running"
    number = exit_signal(returncode, sandboxed)
    if number is not None:
        return f"was killed by {_signal_name(number)}"
    return f"exited with status {returncode}"


def shown(name: str, value: int) -> str:
    if name == "memory":
        for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if value >= size and value % size == 0:
                return f"{value // size} {unit}"
        return f"{value} bytes"
    return f"{value} s" if name == "cpu" else str(value)


def limit_reached(
    returncode: int | None, limits: Limits | None, stderr: Sequence[str], *, sandboxed: bool
) -> str | None:
    """The limit the process ran into, as ``KEY = VALUE``, or None."""
    if returncode is None or limits is None:
        return None
    if exit_signal(returncode, sandboxed) == signal.SIGXCPU and limits.cpu is not None:
        return f"{limits.key('cpu')} = {shown('cpu', limits.cpu)}"
    text = "\n".join(stderr).lower()
    values = limits.values()
    for name, words in _SAYS.items():
        value = values[name]
        if value is not None and any(w in text for w in words):
            return f"{limits.key(name)} = {shown(name, value)}"
    return None


def exit_reason(
    returncode: int | None, limits: Limits | None, stderr: Sequence[str], *, sandboxed: bool
) -> str:
    """``describe_exit``, and the limit that ended it when one did."""
    what = describe_exit(returncode, sandboxed=sandboxed)
    hit = limit_reached(returncode, limits, stderr, sandboxed=sandboxed)
    return f"{what}: it reached its limit {hit}" if hit is not None else what


def exit_signal(returncode: int, sandboxed: bool) -> int | None:
    """The signal that ended the server: bubblewrap exits with 128 + N for a command
    killed by signal N."""
    if returncode < 0:
        return -returncode
    if sandboxed and 128 < returncode < 128 + 65:
        return returncode - 128
    return None
