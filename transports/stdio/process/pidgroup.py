"""A process limit for a server of a root mcpd: a pids cgroup of its own.

The kernel counts RLIMIT_NPROC per user (and per user namespace) but never holds root
to it, also in a namespace where root is mapped to itself. So when mcpd runs as root,
a server's process limit is a cgroup's ``pids.max``: a child of mcpd's own cgroup in
the pids hierarchy (cgroup v1, or v2 at its root), made per server and joined by the
server's first process before it execs anything (``launch``), so nothing it starts is
outside it. A sandboxed server sees the cgroup tree read-only and cannot mount it
afresh (``sandbox.plan``): its limit, and mcpd's cgroup above it, are not its to change.
The cgroup also tells of the server what nothing else can: the forks it refused (for
the exit's reason), and which processes are still the server's once it has stopped.
No trio here (``transports.stdio.process.launch``).
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Final

_V1: Final = "/sys/fs/cgroup/pids"
_V2: Final = "/sys/fs/cgroup"
_PREFIX: Final = "mcpd-"
# How many times what is left in a server's cgroup is read and killed at its stop.
_KILL_ROUNDS: Final = 12

_base: list[str | None] = []  # [where mcpd's server cgroups go, or None], found once


def _own_pids_cgroup() -> str | None:
    """The directory of mcpd's own cgroup in a pids hierarchy it may write, or None."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(",") and os.path.isdir(_V1):
            where = os.path.join(_V1, path.lstrip("/"))
            return where if os.access(where, os.W_OK) else None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        # v2: only at its root may a cgroup with processes have children with controllers.
        if controllers == "" and path == "/":
            try:
                with open(os.path.join(_V2, "cgroup.subtree_control")) as f:
                    enabled = f.read().split()
            except OSError:
                return None
            return _V2 if "pids" in enabled and os.access(_V2, os.W_OK) else None
    return None


def base() -> str | None:
    """Where this mcpd's server cgroups go (made on first use), or None when it cannot
    make any. Leftovers of mcpd processes that are gone are removed then."""
    if not _base:
        own = _own_pids_cgroup()
        where = None
        if own is not None:
            _sweep(own)
            where = os.path.join(own, f"{_PREFIX}{os.getpid()}")
            try:
                os.makedirs(where, exist_ok=True)
            except OSError:
                where = None
        _base.append(where)
    return _base[0]


def _sweep(own: str) -> None:
    with contextlib.suppress(OSError):
        for entry in os.listdir(own):
            pid = entry[len(_PREFIX) :]
            if entry.startswith(_PREFIX) and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                _remove_tree(os.path.join(own, entry))


def _remove_tree(path: str) -> None:
    """rmdir, deepest first: a cgroup's files are not files, only its directories go."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(path):
            if entry.is_dir(follow_symlinks=False):
                _remove_tree(entry.path)
    with contextlib.suppress(OSError):
        os.rmdir(path)


def procs_file(alias: str, limit: int) -> str | None:
    """The ``cgroup.procs`` of ``alias``'s cgroup with ``pids.max`` set to ``limit``, for
    its first process to join; None when no such cgroup can be made."""
    where = base()
    if where is None:
        return None
    group = os.path.join(where, alias)
    try:
        os.makedirs(group, exist_ok=True)
        with open(os.path.join(group, "pids.max"), "w") as f:
            f.write(str(limit))
    except OSError:
        return None
    return os.path.join(group, "cgroup.procs")


def refused(procs: str) -> int | None:
    """How many forks ``procs``'s cgroup has refused at its ``pids.max`` since it was
    made (its ``pids.events``), or None when that cannot be read."""
    try:
        with open(os.path.join(os.path.dirname(procs), "pids.events")) as f:
            for line in f:
                name, _, count = line.partition(" ")
                if name == "max":
                    return int(count)
    except (OSError, ValueError):
        pass
    return None


def cpu_seconds(procs: str) -> float | None:
    """The CPU time the processes of ``procs``'s cgroup have used, or None where the
    cgroup does not count it (a v1 pids cgroup counts nothing but processes)."""
    try:
        with open(os.path.join(os.path.dirname(procs), "cpu.stat")) as f:
            for line in f:
                name, _, value = line.partition(" ")
                if name == "usage_usec":
                    return int(value) / 1e6
    except (OSError, ValueError):
        pass
    return None


def kill_left(procs: str) -> None:
    """SIGKILL what is still in ``procs``'s cgroup once its server has stopped: a helper
    that left the server's session and cleared its environment is found by nothing
    else, but it cannot leave the cgroup. ``cgroup.kill`` (v2) ends them all at once;
    elsewhere each is killed by its pid, in rounds while any is left, as one may fork
    between the reading and the killing."""
    group = os.path.dirname(procs)
    try:
        with open(os.path.join(group, "cgroup.kill"), "w") as f:
            f.write("1")
        return
    except OSError:
        pass
    for _ in range(_KILL_ROUNDS):
        try:
            with open(procs) as f:
                pids = [int(pid) for pid in f.read().split()]
        except (OSError, ValueError):
            return
        if not pids:
            return
        for pid in pids:
            _kill_member(pid, group)


def _kill_member(pid: int, group: str) -> None:
    """SIGKILL ``pid`` if it is still in ``group``: through a pidfd, so that a pid
    reused since it was read is never the one killed."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            paths = [line.rstrip("\n").split(":", 2)[-1] for line in f]
        root = _V1 if group.startswith(_V1 + "/") else _V2
        if "/" + os.path.relpath(group, root) in paths:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(pidfd)


def release(procs: str) -> None:
    """Remove a server's cgroup once its processes are gone (left for the next start of
    the same server, or the next mcpd, when some are still on their way out)."""
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(procs))


def close() -> None:
    """Remove this mcpd's cgroups, once its servers are stopped."""
    if _base and _base[0] is not None:
        _remove_tree(_base[0])
    _base.clear()
