"""Why a stdio server's process ended, in words, naming the limit it ran into.

A limit is named as reached only where the kernel says so: a signal in the exit status
(SIGXCPU at the CPU time limit, outside a sandbox), a fork its pids cgroup refused, or
a sandboxed server's status 128 + SIGXCPU backed by the CPU time its cgroup counted.
Elsewhere a limit shows only as a call that failed inside the server, which its
runtime reports as it dies: that final error (``last_words``) is read for the limit it
names, and the reason says it is the server's word. bubblewrap exits with 128 + N for a
command killed by signal N, which a command can also exit with: a sandboxed server's
status is said as a status, with the signal it would stand for.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from typing import Final, Literal

import msgspec

from ..sandbox.limits import Limits
from .last_words import limit_said

# How sure a named limit is: the kernel said it; the server's final error says it;
# the exit status is what the limit would give, and nothing tells either way.
Sureness = Literal["kernel", "said", "maybe"]
_LEADS: Final = {
    "kernel": "it reached its limit",
    "said": "its last error on stderr says it reached its limit",
    "maybe": "it may have reached its limit",
}


class ProcessEnd(msgspec.Struct, frozen=True, kw_only=True):
    """What is known of how a server's processes ended, besides the exit status."""

    # Forks its pids cgroup refused at pids.max while it ran; None: it has no such cgroup.
    refused_forks: int | None = None
    # CPU time its cgroup counted, in seconds; None: no cgroup counts it.
    cpu_seconds: float | None = None
    # Seconds from its start until its exit was seen: at least as long as it lived.
    lived: float | None = None


class LimitHit(msgspec.Struct, frozen=True):
    """A limit the process ran into (its name in ``LIMIT_NAMES``), as ``KEY = VALUE``,
    and how sure that is."""

    name: str
    limit: str
    sure: Sureness


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def describe_exit(
    returncode: int | None, *, sandboxed: bool = False, signalled: bool = False
) -> str:
    """How the process ended. ``signalled``: a sandboxed status of 128 + N is known to
    be a death by signal N."""
    if returncode is None:
        return "is still running"
    if returncode < 0:
        return f"was killed by {_signal_name(-returncode)}"
    number = _status_signal(returncode, sandboxed)
    if number is None:
        return f"exited with status {returncode}"
    if signalled:
        return f"was killed by {_signal_name(number)}"
    return f"exited with status {returncode} (as a process killed by {_signal_name(number)} would)"


def shown_limit(name: str, value: int) -> str:
    if name == "memory":
        for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if value >= size and value % size == 0:
                return f"{value // size} {unit}"
        return f"{value} bytes"
    return f"{value} s" if name == "cpu" else str(value)


def limit_reached(
    returncode: int | None,
    limits: Limits | None,
    stderr: Sequence[str],
    *,
    sandboxed: bool,
    ending: ProcessEnd | None = None,
) -> LimitHit | None:
    """The limit the process ran into, or None."""
    if returncode is None or limits is None:
        return None
    ending = ending or ProcessEnd()
    values = limits.values()

    def hit(name: str, sure: Sureness) -> LimitHit:
        value = values[name]
        assert value is not None
        return LimitHit(name, f"{limits.key(name)} = {shown_limit(name, value)}", sure)

    if limits.cpu is not None:
        if returncode == -signal.SIGXCPU:
            return hit("cpu", "kernel")
        if sandboxed and returncode == 128 + signal.SIGXCPU:
            cpu = _cpu_sureness(limits.cpu, ending)
            if cpu is not None:
                return hit("cpu", cpu)
    if limits.processes is not None and ending.refused_forks:
        return hit("processes", "kernel")
    # A pids cgroup that refused no fork rules the process limit out, whatever is said.
    names = [
        n
        for n in ("memory", "processes", "open_files")
        if values[n] is not None and not (n == "processes" and ending.refused_forks == 0)
    ]
    said = limit_said(stderr, names)
    return hit(said, "said") if said is not None else None


def _cpu_sureness(limit: int, ending: ProcessEnd) -> Sureness | None:
    """Whether a sandboxed status of 128 + SIGXCPU is the CPU time limit. RLIMIT_CPU
    counts one process's time, which its threads spend at most one CPU each at once."""
    if ending.cpu_seconds is not None:
        return "kernel" if ending.cpu_seconds >= limit else None
    if ending.lived is not None and ending.lived * (os.cpu_count() or 1) < limit:
        return None
    return "maybe"


def exit_reason(
    returncode: int | None,
    limits: Limits | None,
    stderr: Sequence[str],
    *,
    sandboxed: bool,
    ending: ProcessEnd | None = None,
) -> str:
    """``describe_exit``, and the limit that ended it when one did."""
    hit = limit_reached(returncode, limits, stderr, sandboxed=sandboxed, ending=ending)
    # A sandboxed 128 + SIGXCPU the kernel backs is the signal; any other is a status.
    signalled = hit is not None and hit.name == "cpu" and hit.sure == "kernel"
    what = describe_exit(returncode, sandboxed=sandboxed, signalled=signalled)
    return f"{what}: {_LEADS[hit.sure]} {hit.limit}" if hit is not None else what


def _status_signal(returncode: int, sandboxed: bool) -> int | None:
    """The signal a sandboxed status stands for: bubblewrap exits with 128 + N for a
    command killed by signal N."""
    if sandboxed and 128 < returncode < 128 + 65:
        return returncode - 128
    return None
