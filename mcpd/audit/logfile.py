"""The audit log's file, ``calls.jsonl`` in the state directory: appended to, and rotated
when the next line would take it past its cap (``calls.jsonl`` becomes ``calls.jsonl.1``,
``.1`` becomes ``.2``, up to the number of files kept), so the records just written are
in ``.1``, whole, and only the oldest file goes.

Records go only to a file that is mcpd's as mcpd makes it: a regular file, 0600, of
mcpd's user (or root, or the service user), which nobody else can write and which has
no other name (a hard link would send the records, and a mode change, to another file). A state
directory that others could once write to may hold a file another user put there
under that name: a file of theirs would let them read every record and forge more; a
FIFO would hold the writer (and the daemon's stop) forever. It is opened without
following a link and without waiting, and refused before a byte is written, as every
file mcpd reads back is (``privatefile``); mcpd then writes no record to a file until
it is removed, and says so. One of mcpd's own that others may read is made 0600
again, with a warning. Rotation renames only within the directory, over whatever is
at the older names, and the file it then opens is checked as the first was: no record
goes to a file another user planted under any of the names. A rotation never costs the
records: a directory under one of the older names is named and left, the others moved
around it, and a log that cannot be moved at all is added to past its cap, with a
warning, until it can. The oldest file a rotation renames over is gone with its
records: a warning (at most one a minute, which counts the rotations since) says up to
when they were written, and how to keep more, since an agent that calls fast enough
can push every earlier record out.
"""

from __future__ import annotations

import itertools
import logging
import os
import stat
import time
from typing import Final

from protocol.pacing.buckets import Throttle
from protocol.shown.logfields import log_extra

from ..local.state.privatefile import PRIVATE, open_directory, open_private

FILE_NAME: Final = "calls.jsonl"
_FLAGS: Final = os.O_RDWR | os.O_APPEND | os.O_CREAT
_REFUSED: Final = "mcpd writes no record to it until it is removed (mcpd then makes its own)"

logger = logging.getLogger("mcpd.audit")


class LogFile:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, FILE_NAME)
        self._fd: int | None = None
        self._size = 0
        self._past_cap = False
        self._said: set[str] = set()
        self._gone_warning = Throttle(burst=1, every=60.0)
        self.taken = 0  # bytes of the lines last appended that reached the file

    def append(self, lines: bytes, max_bytes: int, files: int) -> None:
        """Whole JSON lines, each ending with a line feed, the file rotated before any
        line would take it past ``max_bytes``, keeping ``files`` files; raises
        ``OSError`` when the file cannot be written (or is refused), with ``taken``
        saying how much of ``lines`` it took first (a full disk takes part of them)."""
        self.taken = 0
        fd = self._open()
        if self._size + len(lines) <= max_bytes:
            self._write_all(fd, lines)
            return
        # A rotation that could not move the log is tried again with the next batch,
        # not with each of this one's lines; the records go to the log meanwhile.
        rotating_failed = False
        for line in lines.splitlines(keepends=True):
            if self._size and self._size + len(line) > max_bytes and not rotating_failed:
                fd = self._rotate(files)
                rotating_failed = self._past_cap
            self._write_all(fd, line)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd, self._size = None, 0

    def _write_all(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            wrote = os.write(fd, view)
            view = view[wrote:]
            self.taken += wrote
        self._size += len(data)

    def _open(self) -> int:
        if self._fd is not None:
            return self._fd
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        dir_fd = open_directory(self.directory)
        try:
            fd, st = open_private(self.path, _FLAGS, _REFUSED, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        try:
            if st.st_mode & 0o077:
                _make_private(fd, self.path, st)
            self._size = st.st_size
            if self._size and os.pread(fd, 1, self._size - 1) != b"\n":
                # A line cut short (by a crash, a full disk) stays on its own.
                os.write(fd, b"\n")
                self._size += 1
        except BaseException:
            os.close(fd)
            self._size = 0
            raise
        self._fd = fd
        return fd

    def _rotate(self, files: int) -> int:
        self.close()
        dir_fd = open_directory(self.directory)
        try:
            moved = self._shift(dir_fd, files)
        finally:
            os.close(dir_fd)
        self._past_cap = not moved
        past_cap = (
            f"the audit log {self.path} cannot be rotated; records go on being added "
            "to it past its cap until the names above are cleared"
        )
        if moved:
            self._said.discard(past_cap)  # said again should it happen again
        else:
            self._warn(past_cap)
        return self._open()

    def _shift(self, dir_fd: int, files: int) -> bool:
        """Each rotated file moved one place older, around names that cannot take one
        (a directory put there is left where it is, and named), and the log itself
        moved to the newest free place; False when it could not be moved."""
        places = [f"{FILE_NAME}.{n}" for n in range(1, files + 1)]
        free = [name for name in places if not self._blocked(dir_fd, name)]
        oldest = _written_until(dir_fd, free[-1]) if free else None
        for older, newer in reversed(list(itertools.pairwise(free))):
            try:
                os.rename(older, newer, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            except OSError as exc:
                self._warn(f"{self._in_dir(older)} cannot be moved to {newer}: {exc.strerror}")
        if not free:
            return False
        try:
            os.rename(FILE_NAME, free[0], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as exc:
            self._warn(f"{self.path} cannot be moved to {free[0]}: {exc.strerror}")
            return False
        if oldest is not None:
            self._gone(oldest, files)
        return True

    def _gone(self, until: float, files: int) -> None:
        """The oldest file, its last record written at ``until``, was renamed over."""
        earlier = self._gone_warning.admit()
        if earlier is None:
            return
        logger.warning(
            "audit records written up to %s were rotated away with the oldest of %d "
            "files%s; to keep more, raise audit_max_bytes or audit_files",
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(until)),
            files,
            f" (and {earlier} older files since the last warning)" if earlier else "",
            extra=log_extra(None, "audit", "audit records rotated away"),
        )

    def _blocked(self, dir_fd: int, name: str) -> bool:
        try:
            st = os.lstat(name, dir_fd=dir_fd)
        except FileNotFoundError:
            return False
        if not stat.S_ISDIR(st.st_mode):
            return False  # renamed over, or moved on, whoever's it is
        self._warn(
            f"{self._in_dir(name)} is a directory, which the audit log's rotation leaves "
            "where it is (remove it to have the name used again)"
        )
        return True

    def _in_dir(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def _warn(self, message: str) -> None:
        """Once for each thing wrong while this file is open to the daemon."""
        if message in self._said:
            return
        self._said.add(message)
        logger.warning(message, extra=log_extra(None, "audit", "audit log rotation"))


def _written_until(dir_fd: int, name: str) -> float | None:
    """When the last record of the rotated file ``name`` was written (its mtime); None
    where there is no such file."""
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    return st.st_mtime if stat.S_ISREG(st.st_mode) else None


def _make_private(fd: int, path: str, st: os.stat_result) -> None:
    """mcpd's own log, which others may read (its mode changed since mcpd made it),
    made 0600 again before another record goes to it."""
    os.fchmod(fd, PRIVATE)
    logger.warning(
        "the audit log %s could be read by other users (mode %04o); made it 0600 again: "
        "what it held until now may have been read",
        path,
        stat.S_IMODE(st.st_mode),
        extra=log_extra(None, "audit", "audit log readable by others"),
    )
