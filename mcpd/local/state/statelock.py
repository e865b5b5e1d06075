"""One daemon for each state directory, held by a lock on the directory and on a file
in it that names the holder.

Two daemons keeping their state in one directory would each write the pins, the last
known tools and the audit log over the other's, and run the same servers in the same
homes. So ``mcpd serve`` takes an exclusive ``flock`` on the state directory, and on
``lock`` in it, before it reads or writes anything there, and holds them for as long as
it runs; a second daemon stops with exit 78 naming the directory and the first one's
pid, which the lock file holds (a directory that was read-only or full for the first
daemon may have no such file: the directory's own lock stops the second all the
same). The kernel lets go of the locks when their holder ends however it ends (a
SIGKILL, systemd stopping it), so a restart takes them again. Commands that only read
the state (``mcpd calls``, ``mcpd pins export``) do not take them.

The lock file is opened as mcpd opens its private files (``privatefile``): never
through a link, and refused when another user could have put it there. Made by root
in a directory of the mcpd service user, it is given to that user, who must be able to
open it to take the lock when it runs the daemon next.

With the lock held, no other mcpd writes into the directory, so the temporary files a
writer that died left there (``name.PID.tmp``, see ``privatefile``) are removed, and
the journal says how many bytes they held. Only those names, only regular files of this
user, and only those of a process that is gone: ``mcpd token --rotate`` may be writing
one as the daemon starts.

No trio here: ``starting.prestart`` takes the lock before the event loop is loaded.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import stat
from collections.abc import Callable
from typing import Final

from ...config.tables.model import EX_CONFIG
from ...starting.cannot_start import DaemonError
from ..ownership.owners import service_uids
from .privatefile import UnsafeFileError, open_directory, open_private

logger = logging.getLogger("mcpd.state")

FILE_NAME: Final = "lock"
# What ``privatefile`` names the file it writes before renaming it over the target.
_TEMPORARY: Final = re.compile(r".+\.([0-9]+)\.tmp")
# The directories of the state directory mcpd writes its private files into.
_WRITTEN_IN: Final = ("", "oauth")

# The state directories this process holds, each with the descriptor of the directory
# it locked, and the lock files it noted its pid in: open (and so locked) until the
# process ends.
_held: dict[str, int] = {}
_files: list[int] = []


class StateDirectoryInUse(DaemonError):
    """The state directory is another daemon's, or its lock cannot be used: a place to
    change, as a config error is, so systemd does not start mcpd again and again."""

    exit_code = EX_CONFIG


def hold_state_directory(path: str) -> None:
    """Take the lock of the state directory ``path`` for the rest of this process
    (again: nothing), then clear what dead writers left in it. Raises
    ``StateDirectoryInUse`` saying which daemon has it, or why it cannot be taken."""
    path = os.path.realpath(path)
    if path in _held:
        return
    try:
        dir_fd = open_directory(path)
    except UnsafeFileError as exc:
        # Missing or unusable: what writes there says so; nothing there to share.
        logger.warning("cannot lock the state directory: %s", exc)
        return
    try:
        # The directory itself, always: a daemon that could make no lock file (a
        # read-only or full directory) and one that could must still exclude each other.
        whole = os.dup(dir_fd)
        try:
            _take(whole, path, lambda: _holder_named(dir_fd))
            fd = _open_lock(path, dir_fd)
            if fd is not None:
                _take(fd, path, lambda: _holder(fd))
        except BaseException:
            os.close(whole)
            raise
        if fd is not None:
            _note_pid(fd)
            _files.append(fd)
        _held[path] = whole
        _clear_leftovers(path, dir_fd)
    finally:
        os.close(dir_fd)


def _take(fd: int, path: str, holder: Callable[[], str]) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise StateDirectoryInUse(
                f"cannot lock the state directory {path}: {exc.strerror}"
            ) from None
        raise StateDirectoryInUse(
            f"another mcpd ({holder()}) keeps its state in {path}; stop it first, or "
            "give this one a state_dir of its own"
        ) from None


def _open_lock(path: str, dir_fd: int) -> int | None:
    where = os.path.join(path, FILE_NAME)
    fix = f"remove it (rm {where}) and start mcpd again"
    try:
        fd, _ = open_private(where, os.O_RDWR | os.O_CREAT, fix, dir_fd=dir_fd)
    except UnsafeFileError as exc:
        raise StateDirectoryInUse(str(exc)) from None
    except OSError as exc:
        if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC):
            raise StateDirectoryInUse(f"cannot open {where}: {exc.strerror}") from None
        try:
            # A read-only directory: a lock made there before still works read-only.
            fd, _ = open_private(where, os.O_RDONLY, fix, dir_fd=dir_fd)
        except UnsafeFileError as unsafe:
            raise StateDirectoryInUse(str(unsafe)) from None
        except FileNotFoundError:
            # No file to note the pid in: the directory's own lock still stops a second
            # daemon, which is told no pid.
            return None
        except OSError as again:
            raise StateDirectoryInUse(f"cannot open {where}: {again.strerror}; {fix}") from None
    if os.geteuid() == 0:
        # Root's daemon in the service user's directory: the service's daemon must be
        # able to open the lock to take it after this one.
        directory = os.fstat(dir_fd)
        if directory.st_uid in service_uids():
            with contextlib.suppress(OSError):  # read-only: as it was
                os.fchown(fd, directory.st_uid, directory.st_gid)
    return fd


def _holder_named(dir_fd: int) -> str:
    """The pid the lock file in the directory ``dir_fd`` names, as ``_holder`` says it."""
    try:
        fd = os.open(FILE_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return "pid unknown"
    try:
        return _holder(fd)
    finally:
        os.close(fd)


def _holder(fd: int) -> str:
    try:
        said = os.pread(fd, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        said = ""
    return f"pid {said}" if said.isdigit() else "pid unknown"


def _note_pid(fd: int) -> None:
    with contextlib.suppress(OSError):  # opened read-only, or full: the lock holds without it
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def _clear_leftovers(path: str, dir_fd: int) -> None:
    count = size = 0
    for sub in _WRITTEN_IN:
        try:
            fd = dir_fd if not sub else open_directory(os.path.join(path, sub))
        except UnsafeFileError:
            continue  # missing, or not mcpd's: nothing of its own there
        try:
            removed, freed = _remove_dead_temporaries(fd)
        finally:
            if fd != dir_fd:
                os.close(fd)
        count, size = count + removed, size + freed
    if count:
        logger.info(
            "removed %d temporary file(s) of %d bytes that a stopped mcpd left in %s",
            count,
            size,
            path,
        )


def _remove_dead_temporaries(fd: int) -> tuple[int, int]:
    count = size = 0
    uid = os.geteuid()
    with os.scandir(fd) as entries:
        names = [e.name for e in entries]
    for name in names:
        found = _TEMPORARY.fullmatch(name)
        if found is None or _alive(int(found[1])):
            continue
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != uid:
                continue
            os.unlink(name, dir_fd=fd)
        except OSError:
            continue
        count, size = count + 1, size + st.st_size
    return count, size


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except OSError:
        return True  # another user's process: not this one's to judge
    return True
