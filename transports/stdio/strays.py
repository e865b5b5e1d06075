"""Processes a stdio server started that left its process group, found and stopped.

Stopping a server signals its whole process group, and the kernel kills its direct
child if mcpd dies; a descendant that called ``setsid()`` (a daemonizing helper, a
language server) escapes both, and outlived every restart with PPID 1. Under systemd
the unit's cgroup still holds it; elsewhere only its environment does: each child is
started with a token of its own (``launch.START_MARK``) that descendants inherit. When
a server is stopped, after its group is gone, the processes of mcpd's own user whose
environment carries that server's token are stopped too.

The scan reads ``/proc`` in a worker thread, only at a stop, and is bounded in the
processes it looks at and the bytes it reads of each. A descendant that cleared its
environment is not found.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from typing import Final

import trio

from protocol.logfields import log_extra

from .launch import START_MARK

logger = logging.getLogger("mcpd.stdio")

_MAX_PROCESSES: Final = 65536  # /proc entries looked at in one scan
_MAX_ENVIRON: Final = 1 << 20  # bytes read of one process's environment


def _carries(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read(_MAX_ENVIRON)
    except OSError:
        return False  # gone, or not ours to read
    # Each variable ends with a NUL; a zombie's environment reads empty.
    return (b"\0" + environ).find(b"\0" + needle + b"\0") >= 0


def marked(token: str, group: int) -> list[int]:
    """The pids of this user's processes (other than mcpd) that carry ``token``, but
    for those of the process group ``group``, which its own SIGKILL is taking down."""
    needle = f"{START_MARK}={token}".encode()
    uid, me = os.getuid(), os.getpid()
    found = []
    with os.scandir("/proc") as entries:
        for n, entry in enumerate(entries):
            if n >= _MAX_PROCESSES:
                break
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            try:
                if pid == me or entry.stat().st_uid != uid:
                    continue
            except OSError:
                continue
            if _carries(pid, needle) and _group_of(pid) != group:
                found.append(pid)
    return found


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _open(pids: list[int], token: str) -> dict[int, int]:
    """A pidfd for each process still carrying ``token``: signals sent through it
    cannot reach another process that took a pid freed since the scan."""
    needle = f"{START_MARK}={token}".encode()
    fds: dict[int, int] = {}
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        if _carries(pid, needle):  # read again: the pid is now held
            fds[pid] = fd
        else:
            os.close(fd)
    return fds


def _signal(fds: dict[int, int], sig: signal.Signals) -> None:
    for fd in fds.values():
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(fd, sig)


async def _wait_gone(fds: dict[int, int], grace: float) -> None:
    """Wait up to ``grace`` for the processes to exit; those that did leave ``fds``."""

    async def one(pid: int, fd: int) -> None:
        await trio.lowlevel.wait_readable(fd)
        os.close(fds.pop(pid))

    with trio.move_on_after(grace):
        async with trio.open_nursery() as nursery:
            for pid, fd in list(fds.items()):
                nursery.start_soon(one, pid, fd)


async def stop_strays(alias: str, token: str, group: int, grace: float) -> None:
    """Stop what is left of a stopped server's descendants outside its process group
    ``group``: SIGTERM, then SIGKILL after ``grace``. Call it after the group's kill."""
    # The os module defines pidfd_open only where the kernel and libc offer it.
    if not token or not hasattr(os, "pidfd_open"):
        return
    pids = await trio.to_thread.run_sync(marked, token, group, abandon_on_cancel=True)
    if not pids:
        return
    fds = _open(pids, token)
    if not fds:
        return
    logger.warning(
        "%s: %d process(es) it started had left its process group and were still running "
        "(pids %s); stopping them",
        alias,
        len(fds),
        ", ".join(map(str, sorted(fds))),
        extra=log_extra(alias, "strays", f"{len(fds)} outside its process group"),
    )
    try:
        _signal(fds, signal.SIGTERM)
        await _wait_gone(fds, grace)
        if fds:
            _signal(fds, signal.SIGKILL)
            await _wait_gone(fds, grace)
    finally:
        for fd in fds.values():
            os.close(fd)
