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
(see ``ownership.owners``) that no other user can write to. Elsewhere, others could swap or
delete the file whatever its own mode says.

Reading such a file back (``read_private``), or adding to one (``open_private``, the
audit log), is checked the same way: it must be a regular file of one of those users
that no one else can write and that has no other name (a hard link to another file),
or what it says may be another user's choice (a token they know, a login endpoint of
theirs, a record they forged), and what is added to it theirs to read, or appended to
a file elsewhere. It is opened without waiting: a FIFO put in its place must not hold mcpd.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from collections.abc import Callable, Iterable
from typing import Final

from ..ownership.owners import acl_of, not_trusted, other_writers, trusted_owners, user_name

PRIVATE: Final = 0o600
_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
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
    dir_fd = open_directory(directory)
    try:
        return write_in(dir_fd, name, data, mode=mode, owner=owner, before_rename=before_rename)
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
    not a regular file, another user's, writable by others, or has other names."""
    try:
        fd, st = open_private(path, os.O_RDONLY, fix)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read(), st


def open_private(
    path: str, flags: int, fix: str, *, dir_fd: int | None = None
) -> tuple[int, os.stat_result]:
    """A descriptor of a file mcpd keeps for itself (opened with ``flags``, relative to
    ``dir_fd`` by its base name if given) and its status. It is opened without following
    a link and without waiting (a FIFO or a device would block an open, a read or a
    write), then refused as ``read_private`` says, before anything is read or written."""
    opened = flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    name = path if dir_fd is None else os.path.basename(path)
    try:
        fd = os.open(name, opened, PRIVATE, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP and _is_link(name, dir_fd):
            raise UnsafeFileError(
                f"{path} is a symbolic link, which mcpd never writes there; {fix}"
            ) from None
        raise
    try:
        st = os.fstat(fd)
        why = _not_private(path, st)
        if why is not None:
            raise UnsafeFileError(f"{why}; {fix}")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _not_private(path: str, st: os.stat_result) -> str | None:
    if not stat.S_ISREG(st.st_mode):
        kind = file_kind(st)
        return f"{path} is not a regular file ({kind} of uid {st.st_uid}, {user_name(st.st_uid)})"
    if st.st_uid not in trusted_owners():
        return f"{not_trusted(path, st.st_uid)}, so mcpd does not trust what it says"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (
            f"{path} can be written by other users (mode {stat.S_IMODE(st.st_mode):04o}), "
            "so mcpd does not trust what it says"
        )
    if st.st_nlink != 1:
        # Another name of some other file (a hard link needs no right to the file): what
        # mcpd writes would land there, and what it reads would be that file's.
        return f"{path} has {st.st_nlink} hard links, so it is not a file mcpd keeps for itself"
    return None


_KINDS: Final = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFDIR: "a directory",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def file_kind(st: os.stat_result) -> str:
    """What a file that is not a regular one is, in words ("a FIFO")."""
    return _KINDS.get(stat.S_IFMT(st.st_mode), "a special file")


def _is_link(name: str, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def write_in(
    dir_fd: int,
    name: str,
    data: bytes | Iterable[bytes],
    *,
    mode: int | None = PRIVATE,
    owner: tuple[int, int] | None = None,
    before_rename: Callable[[int], None] | None = None,
    replace: bool = True,
) -> os.stat_result:
    """Write ``data`` as the file ``name`` of the directory ``dir_fd``, never through a
    link, and sync it and the directory. With ``replace`` a temporary file beside it is
    renamed over the name, whatever is there; without, the name itself is created
    exclusively (``FileExistsError`` when it is taken). ``mode`` is set before any byte
    is written; None leaves the mode a new file gets (0666 less the umask), as a shell's
    ``>`` gives it. ``owner``, ``before_rename`` (with ``replace``) and the return are
    as for ``write_atomically``."""
    if not replace:
        fd = os.open(name, _CREATE, 0o666 if mode is None else PRIVATE, dir_fd=dir_fd)
        written = _fill(fd, dir_fd, name, data, mode, owner)
        os.fsync(dir_fd)
        return written
    tmp = f"{name}.{os.getpid()}.tmp"
    with _lock:
        written = _fill(_create(dir_fd, tmp, mode), dir_fd, tmp, data, mode, owner)
        try:
            if before_rename is not None:
                before_rename(dir_fd)
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
    os.fsync(dir_fd)
    return written


def _fill(
    fd: int,
    dir_fd: int,
    name: str,
    data: bytes | Iterable[bytes],
    mode: int | None,
    owner: tuple[int, int] | None,
) -> os.stat_result:
    """Write the file just created as ``name`` and sync it; removed again when it
    cannot be."""
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
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
            return os.fstat(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        raise


def _create(dir_fd: int, tmp: str, mode: int | None) -> int:
    first = 0o666 if mode is None else PRIVATE
    try:
        return os.open(tmp, _CREATE, first, dir_fd=dir_fd)
    except FileExistsError:
        # Left by a writer with this process id that died, or put there: whatever it
        # is (a file with a wider mode, a link), it goes, and the name is created anew.
        os.unlink(tmp, dir_fd=dir_fd)
    try:
        return os.open(tmp, _CREATE, first, dir_fd=dir_fd)
    except FileExistsError:
        raise UnsafeFileError(f"{tmp} reappeared as mcpd replaced it; not writing") from None
