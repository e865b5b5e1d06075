"""What a stdio server may take of the machine: the limits its config sets.

Limits are set by ``prlimit`` inside the namespaces, so that the process limit counts
the server's own processes (the kernel counts RLIMIT_NPROC per user and per user
namespace) rather than every process of mcpd's user. Memory is RLIMIT_DATA, what a
process may allocate: address-space limits break runtimes that reserve large ranges
they never use (V8, the JVM, Go).
"""

from __future__ import annotations

from typing import Final

import msgspec

# Where each limit is set, for messages: "servers.x.limits.memory".
LIMIT_NAMES: Final = ("memory", "processes", "open_files", "cpu")


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    memory: int | None = None  # bytes a process may allocate (RLIMIT_DATA)
    processes: int | None = None  # tasks of the server's own user namespace
    open_files: int | None = None
    cpu: int | None = None  # seconds of CPU time, per process
    keys: dict[str, str] = msgspec.field(default_factory=dict)

    def values(self) -> dict[str, int | None]:
        """Each limit by its name in ``LIMIT_NAMES``, None where it is not set."""
        return {
            "memory": self.memory,
            "processes": self.processes,
            "open_files": self.open_files,
            "cpu": self.cpu,
        }

    def any(self) -> bool:
        return any(value is not None for value in self.values().values())

    def key(self, name: str) -> str:
        return self.keys.get(name, f"limits.{name}")


def prlimit_args(
    limits: Limits, prlimit: str | None, nofile_hard: int | None, *, processes: bool
) -> list[str]:
    """The command line of ``prlimit`` (its path, None where it is missing) up to its
    ``--``; empty when no limit is set. ``nofile_hard``: mcpd's own hard limit on open
    files, which a child cannot go above; ``processes``: whether the process limit can
    be applied (inside a user namespace)."""
    if not limits.any() or prlimit is None:
        return []
    args = [prlimit]
    if limits.memory is not None:
        args.append(f"--data={limits.memory}")
    if limits.processes is not None and processes:
        args.append(f"--nproc={limits.processes}")
    if limits.open_files is not None:
        n = limits.open_files
        if nofile_hard is not None:
            n = min(n, nofile_hard)
        args.append(f"--nofile={n}")
    if limits.cpu is not None:
        # SIGXCPU at the limit; SIGKILL a second later for a server that ignores it.
        args.append(f"--cpu={limits.cpu}:{limits.cpu + 1}")
    return [*args, "--"] if len(args) > 1 else []
