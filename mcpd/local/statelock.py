"""One daemon for each state directory, held by a lock on a file in it, or on the
directory itself where no such file can be made.

Two daemons keeping their state in one directory would each write the pins, the last
known tools and the audit log over the other's, and run the same servers in the same
homes. So ``mcpd serve`` takes an exclusive ``flock`` on ``lock`` in the state
directory before it reads or writes anything there, and holds it for as long as it
runs; a second daemon stops with exit 78 naming the directory and the first one's pid,
which the lock file holds. The kernel lets go of the lock when its holder ends however
it ends (a SIGKILL, systemd stopping it), so a restart takes it again. Commands that
only read the state (``mcpd calls``, ``mcpd pins export``) do not take it.

The lock file is opened as mcpd opens its private files (``privatefile``): never
through a link, and refused when another user could have put it there. Made by root
in a directory of the mcpd service user, it is given to that user, who must be able to
open it to take the lock when it runs the daemon next.

With the lock held, no other mcpd writes into the directory, so the temporary files a
writer that died left there (``name.PID.tmp``, see ``privatefile``) are removed, and
the journal says how many bytes they held. Only those names, only regular files of this
user, and only those of a process that is gone: ``mcpd token --rotate`` may be writing
one as the daemon starts.

No trio here: ``prestart`` takes the lock before the event loop is loaded.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import stat
from typing import Final

from ..config.model import EX_CONFIG
from ..errors import DaemonError
from .owners import service_uids
from .privatefile import UnsafeFileError, open_directory, open_private

logger = logging.getLogger("mcpd.state")

FILE_NAME: Final = "lock"
# What ``privatefile`` names the file it writes before renaming it over the target.
_TEMPORARY: Final = re.compile(r".+\.([0-9]+)\.tmp")
# The directories of the state directory mcpd writes its private files into.
_WRITTEN_IN: Final = ("", "oauth")

# The state directories this process holds, each with its lock file's descriptor, open
# (and so locked) until the process ends.
_held: dict[str, int] = {}


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
        fd = _open_lock(path, dir_fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _holder(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise StateDirectoryInUse(
                    f"cannot lock the state directory {path}: {exc.strerror}"
                ) from None
            raise StateDirectoryInUse(
                f"another mcpd ({holder}) keeps its state in {path}; stop it first, or "
                "give this one a state_dir of its own"
            ) from None
        _note_pid(fd)
        _held[path] = fd
        _clear_leftovers(path, dir_fd)
    finally:
        os.close(dir_fd)


def _open_lock(path: str, dir_fd: int) -> int:
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
            # No file to lock, nor any way to make one: the directory itself is locked
            # (it names no pid to a second daemon, but stops it all the same).
            logger.info("cannot make %s (%s): the directory itself is locked", where, exc.strerror)
            return os.dup(dir_fd)
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
