"""Processes a stdio server started that left its process group, found and stopped.

Stopping a server signals its whole process group, and the kernel kills its direct
child if mcpd dies; a descendant that called ``setsid()`` (a daemonizing helper, a
language server) escapes both, and outlived every restart with PPID 1. Under systemd
the unit's cgroup still holds it; elsewhere only its environment does: each child is
started with a token of its own (``launch.START_MARK``) that descendants inherit. When
a server is stopped, after its group is gone, the processes of mcpd's own user whose
environment carries that server's token are stopped too: SIGTERM first, then SIGKILL
for what is left.

A process that keeps forking, its parent exiting each time, is a new pid every moment:
the one a scan saw is gone by the time it is signalled, and its child was not seen. So
what SIGTERM left is killed by sweeps: each scan tries the newest pids first and
SIGKILLs a process the moment it finds it (a fork in progress is abandoned with it),
and the sweeps go on until two in a row find no process they had not killed already.
A forker escapes a sweep only by being a new pid before the scan reaches it; a fixed
number of sweeps bounds the time a stop takes against one that keeps doing that.

The scans read ``/proc`` in a worker thread, only at a stop, and are bounded in the
processes they look at and the bytes they read of each. A descendant that cleared its
environment is not found.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Iterator
from typing import Final

import trio

from protocol.shown.logfields import log_extra

from .launch import START_MARK

logger = logging.getLogger("mcpd.stdio")

_MAX_PROCESSES: Final = 65536  # /proc entries looked at in one scan
_MAX_ENVIRON: Final = 1 << 20  # bytes read of one process's environment
_PIECE: Final = 1 << 16  # bytes read at a time
_RECENT: Final = 1024  # pid numbers handed out last, tried before /proc is listed
_CATCH_UPS: Final = 4  # passes over the pids handed out while the last pass ran
# Sweeps after SIGTERM: they end once _QUIET in a row find nothing new, as one can miss
# a forker whose every pid outlives the scan's reaching it by little (on a loaded
# machine, the scan itself waits for a CPU). More than a few finding new ones means
# processes that out-fork the scan on purpose; each sweep costs a pass over /proc and
# up to the grace for what it killed to exit, and _SWEEPS bounds them.
_SWEEPS: Final = 12
_QUIET: Final = 2


def _carries(pid: int, needle: bytes) -> bool:
    try:
        fd = os.open(f"/proc/{pid}/environ", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False  # gone, or not ours to read
    # Read in pieces: a buffer of the whole bound, made for each process, cost more than
    # the read itself.
    parts: list[bytes] = []
    size = 0
    try:
        while size < _MAX_ENVIRON:
            part = os.read(fd, min(_PIECE, _MAX_ENVIRON - size))
            if not part:
                break
            parts.append(part)
            size += len(part)
    except OSError:
        return False
    finally:
        os.close(fd)
    # Each variable ends with a NUL; a zombie's environment reads empty.
    return (b"\0" + b"".join(parts)).find(b"\0" + needle + b"\0") >= 0


def _last_pid() -> tuple[int, int] | None:
    """The pid the kernel handed out last and the number pids wrap at; None where they
    cannot be told."""
    try:
        with open("/proc/sys/kernel/ns_last_pid") as f:
            last = int(f.read())
        with open("/proc/sys/kernel/pid_max") as f:
            return last, int(f.read())
    except (OSError, ValueError):
        return None


def _recent() -> Iterator[int]:
    """The pid numbers handed out last, newest first, by number: ``_RECENT`` of them,
    then, up to ``_CATCH_UPS`` times, those handed out while they were tried."""
    told = _last_pid()
    if told is None:
        return
    last, top = told
    span = min(_RECENT, top - 1)
    for _ in range(_CATCH_UPS):
        for n in range(span):
            if (pid := (last - n) % top) > 0:
                yield pid
        now = _last_pid()
        if now is None or now[0] == last:
            return
        span = min((now[0] - last) % top, _RECENT)
        last = now[0]


def _candidates() -> Iterator[int]:
    """The pids to look at. A process that keeps forking is, at any moment, among the
    newest, and gone from a listing of /proc by the time the scan reaches it there: so
    the pid numbers handed out last are tried first, by number, newest first; then the
    rest of what /proc lists."""
    tried = set()
    for pid in _recent():
        tried.add(pid)
        yield pid
    listed = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    listed = [pid for pid in listed if pid not in tried]
    yield from sorted(listed, reverse=True)[:_MAX_PROCESSES]


def _scan(token: str, group: int) -> Iterator[int]:
    needle = f"{START_MARK}={token}".encode()
    uid, me = os.getuid(), os.getpid()
    for pid in _candidates():
        # The environment first: it is what rules most processes out, and the cheapest.
        if pid == me or not _carries(pid, needle):
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
        except OSError:
            continue
        if _group_of(pid) != group:
            yield pid


def marked_pids(token: str, group: int) -> list[int]:
    """The pids of this user's processes (other than mcpd) that carry ``token``, but
    for those of the process group ``group``, which its own SIGKILL is taking down."""
    return list(_scan(token, group))


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


def _sweep(token: str, group: int, killed: frozenset[int]) -> dict[int, int]:
    """SIGKILL to each process carrying ``token`` outside ``group`` as the scan finds
    it; a pidfd for each one not among ``killed`` (pids killed before)."""
    found: dict[int, int] = {}
    for pid in _scan(token, group):
        fds = _open([pid], token)
        _signal(fds, signal.SIGKILL)
        if pid in killed:
            for fd in fds.values():
                os.close(fd)
        else:
            found.update(fds)
    return found


def _close(fds: dict[int, int]) -> None:
    for fd in fds.values():
        os.close(fd)
    fds.clear()


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
    ``group``: SIGTERM, then after ``grace`` SIGKILL to what is left and to what
    appeared since. Call it after the group's kill."""
    # The os module defines pidfd_open only where the kernel and libc offer it.
    if not token or not hasattr(os, "pidfd_open"):
        return
    pids = await trio.to_thread.run_sync(marked_pids, token, group, abandon_on_cancel=True)
    if not pids:
        return
    fds = _open(pids, token)
    if fds:
        logger.warning(
            "%s: %d process(es) it started had left its process group and were still "
            "running (pids %s); stopping them",
            alias,
            len(fds),
            ", ".join(map(str, sorted(fds))),
            extra=log_extra(alias, "strays", f"{len(fds)} outside its process group"),
        )
        try:
            _signal(fds, signal.SIGTERM)
            await _wait_gone(fds, grace)
        finally:
            _close(fds)
    await _kill_left(alias, token, group, grace)


async def _kill_left(alias: str, token: str, group: int, grace: float) -> None:
    """The sweeps: SIGKILL to what carries ``token`` outside ``group`` until ``_QUIET``
    in a row find nothing new, or ``_SWEEPS`` of them."""
    killed: set[int] = set()
    rounds = quiet = 0
    while quiet < _QUIET:
        if rounds == _SWEEPS:
            logger.warning(
                "%s: processes it started outside its process group were still appearing "
                "after %d rounds of killing them (pids %s); some may be left running",
                alias,
                rounds,
                ", ".join(map(str, sorted(killed))),
                extra=log_extra(alias, "strays", f"still appearing after {rounds} sweeps"),
            )
            return
        rounds += 1
        # Not abandoned: the sweep holds the pidfds it hands back.
        found = await trio.to_thread.run_sync(_sweep, token, group, frozenset(killed))
        if not found:
            quiet += 1
            continue
        quiet = 0
        killed.update(found)
        try:
            await _wait_gone(found, grace)
        finally:
            _close(found)
    if killed:
        logger.warning(
            "%s: %d process(es) it started outside its process group were still running "
            "after SIGTERM (pids %s); killed them",
            alias,
            len(killed),
            ", ".join(map(str, sorted(killed))),
            extra=log_extra(alias, "strays", f"{len(killed)} killed outside its process group"),
        )
