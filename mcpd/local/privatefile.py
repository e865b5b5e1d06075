"""Replacing a file whole, with its mode set before anyone can open it, never through a
symbolic link.

Every file mcpd writes that holds a secret (the endpoint token, OAuth credentials, the
last known tools, imported secrets) and the host config files ``mcpd connect`` edits
are written the same way: a temporary file beside the target, created exclusively
(``O_CREAT|O_EXCL|O_NOFOLLOW``) and set to its final mode and owner while still empty;
the data, synced; a rename over the target, which replaces whatever is there, a
symbolic link included, instead of writing where a link points; then the directory,
synced, so that the rename survives a crash. Readers see the old file or the new one,
never half of one.

All of it happens relative to the directory, opened once (without following a link)
and checked: it must be a real directory of this user, root or the mcpd service user
(see ``owners``) that no other user can write to. Elsewhere, others could swap or
delete the file whatever its own mode says.

Reading such a file back (``read_private``) is checked the same way: it must be a
regular file of one of those users that no one else can write, or what it says may
be another user's choice (a token they know, a login endpoint of theirs).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Callable, Iterable
from typing import Final

from .owners import acl_of, not_trusted, other_writers, trusted_owners

PRIVATE: Final = 0o600
# The temporary file's name is the process's, so writers in one process take turns.
_lock: Final = threading.Lock()


class UnsafeFileError(OSError):
    """The file cannot be written safely where it is; the message says why."""


def write_atomically(
    path: str | os.PathLike[str],
    data: bytes | Iterable[bytes],
    *,
    mode: int = PRIVATE,
    owner: tuple[int, int] | None = None,
    before_rename: Callable[[int], None] | None = None,
) -> os.stat_result:
    """Replace the file at ``path`` with ``data``, with ``mode`` (0600 unless given) and
    ``owner`` (uid, gid; root only). Its directory is created (0700) when missing.
    ``data`` may come in pieces, each written as it comes (an error while they come
    leaves the file as it was). ``before_rename`` is given the directory's descriptor
    once the new file is complete; what it raises leaves the file as it was too.
    Returns the new file's status, as it was written."""
    path = os.fspath(path)
    directory, name = os.path.split(path)
    directory = directory or "."
    if not name:
        raise UnsafeFileError(f"{path!r} names a directory, not a file")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    with _lock:
        dir_fd = open_directory(directory)
        try:
            return _replace(dir_fd, name, data, mode, owner, before_rename)
        finally:
            os.close(dir_fd)


def make_private_directory(path: str | os.PathLike[str]) -> None:
    """Create ``path`` (0700), or make an existing one of this user's 0700; never
    through a link."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    fd = open_directory(os.fspath(path), check=False)
    try:
        if os.fstat(fd).st_uid != os.geteuid():
            raise UnsafeFileError(
                f"{os.fspath(path)} belongs to another user, who could read or replace "
                "what mcpd writes there"
            )
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


def open_directory(directory: str, *, check: bool = True) -> int:
    """A descriptor of ``directory``, refused if it is a symbolic link or not a
    directory, and (with ``check``) if it belongs to another user or other users can
    write to it."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(directory, flags)
    except OSError as exc:
        if os.path.islink(directory):
            raise UnsafeFileError(
                f"{directory} is a symbolic link; mcpd writes there only into a real "
                "directory (give the path it points to instead)"
            ) from None
        raise UnsafeFileError(f"cannot open the directory {directory}: {exc.strerror}") from None
    if not check:
        return fd
    st = os.fstat(fd)
    if st.st_uid not in trusted_owners():
        os.close(fd)
        raise UnsafeFileError(
            f"{not_trusted(directory, st.st_uid)}: its owner could replace or read what "
            "mcpd writes there; use a directory of your own"
        )
    who = other_writers(st, acl_of(fd))
    if who is None:
        return fd
    os.close(fd)
    if st.st_mode & stat.S_ISVTX:
        raise UnsafeFileError(
            f"{directory} is shared by {who} (like /tmp), who could put a file there under "
            "the name mcpd writes; use a directory of your own"
        )
    raise UnsafeFileError(
        f"{directory} can be written by {who}, who could replace what mcpd writes there; "
        f"run chmod go-w {directory}"
    )


def read_private(path: str, fix: str) -> tuple[bytes, os.stat_result] | None:
    """The content of a file mcpd wrote for itself, and its status; None when there is
    none. Refused (``UnsafeFileError``, saying why and then ``fix``) when it is a link,
    not a regular file, another user's, or writable by others."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError:
        if os.path.islink(path):
            raise UnsafeFileError(
                f"{path} is a symbolic link, which mcpd never writes there; {fix}"
            ) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        # Before the descriptor becomes a file object: one refuses a directory itself,
        # leaving the descriptor open.
        os.close(fd)
        raise UnsafeFileError(f"{path} is not a regular file; {fix}")
    with os.fdopen(fd, "rb") as f:
        if st.st_uid not in trusted_owners():
            raise UnsafeFileError(
                f"{not_trusted(path, st.st_uid)}, so mcpd does not trust what it says; {fix}"
            )
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise UnsafeFileError(
                f"{path} can be written by other users (mode {stat.S_IMODE(st.st_mode):04o}), "
                f"so mcpd does not trust what it says; {fix}"
            )
        return f.read(), st


def _replace(
    dir_fd: int,
    name: str,
    data: bytes | Iterable[bytes],
    mode: int,
    owner: tuple[int, int] | None,
    before_rename: Callable[[int], None] | None,
) -> os.stat_result:
    tmp = f"{name}.{os.getpid()}.tmp"
    fd = _create(dir_fd, tmp)
    try:
        with os.fdopen(fd, "wb") as f:
            # Before any byte is written, and exactly: O_CREAT's mode passes the umask.
            os.fchmod(f.fileno(), mode)
            if owner is not None:
                os.fchown(f.fileno(), *owner)
            if isinstance(data, bytes):
                f.write(data)
            else:
                f.writelines(data)
            f.flush()
            os.fsync(f.fileno())
            written = os.fstat(f.fileno())
        if before_rename is not None:
            before_rename(dir_fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)
    return written


def _create(dir_fd: int, tmp: str) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(tmp, flags, PRIVATE, dir_fd=dir_fd)
    except FileExistsError:
        # Left by a writer with this process id that died, or put there: whatever it
        # is (a file with a wider mode, a link), it goes, and the name is created anew.
        os.unlink(tmp, dir_fd=dir_fd)
    try:
        return os.open(tmp, flags, PRIVATE, dir_fd=dir_fd)
    except FileExistsError:
        raise UnsafeFileError(f"{tmp} reappeared as mcpd replaced it; not writing") from None
