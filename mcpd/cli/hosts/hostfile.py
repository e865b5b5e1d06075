"""A host's config file replaced with care: found where it really is, read only as a
regular file, and replaced only if its host has not written it in the meantime.

The user's own links (a dotfiles checkout, a linked folder) are followed, so the link
stays and what it points at is replaced. They are read one at a time, as the kernel
follows them, and each is judged in the directory where it really is: a link in a
directory that another user owns or can write, or a link another user owns, may be
theirs to point anywhere, so none is followed from there.

Hosts rewrite their files as they run (Claude Code its ``~/.claude.json`` all the
time). So just before the new file is renamed into place, the file is read again; if
it changed, the edit is made again from what is there now, and after a few such
tries the file is left to its host with an error saying so. The old file is kept as
``FILE.bak-YYYYmmddHHMMSS``, and removed again when the new one is not written.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec

from ...local.ownership.owners import not_trusted, trusted_owners
from ...local.state.privatefile import UnsafeFileError, open_directory, write_atomically

# How often a file that changed under the edit is read and edited again.
ATTEMPTS: Final = 5
# The kernel's own bound on the links followed for one path.
MAX_LINKS: Final = 40


class HostConfigError(ValueError):
    """A request or an existing file that cannot be honoured; the message says why."""


class Written(msgspec.Struct, frozen=True):
    path: Path
    backup: Path | None  # the previous file, when there was one and it changed
    changed: bool
    tightened: bool = False  # others could read the file, and now cannot


class _Changed(Exception):
    """The file is no longer what the edit was made from."""


def replace_file(
    path: str | os.PathLike[str], change: Callable[[str], str], *, private: bool = False
) -> Written:
    """Put ``change(text)`` in place of the file's text ("" for none); ``change`` may
    raise HostConfigError to leave the file alone. The new file keeps the old one's mode
    (0600 for a new file: it may hold a token); with ``private``, it keeps no access for
    group or others. Nothing is written if nothing changes."""
    target = Path(path)
    try:
        target = real_path(target)
        for _ in range(ATTEMPTS):
            with contextlib.suppress(_Changed):
                return _replace(target, _read(target), change, private)
    except UnsafeFileError as exc:
        raise HostConfigError(str(exc)) from None
    except OSError as exc:
        raise HostConfigError(f"cannot write {target}: {exc.strerror or exc}") from None
    raise HostConfigError(
        f"{target} kept changing while mcpd added its entry: its host is writing it; "
        "quit the host and run this again"
    )


def _read(target: Path, dir_fd: int | None = None) -> bytes | None:
    """The file's bytes, None when there is none; refused when it is not a regular file
    (a FIFO would keep the read waiting for a writer)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    name = target.name if dir_fd is not None else str(target)
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)  # before it is a file object, which refuses a directory unclosed
        raise HostConfigError(f"{target} is not a regular file; mcpd edits only a file there")
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _replace(
    target: Path, raw: bytes | None, change: Callable[[str], str], private: bool
) -> Written:
    try:
        # The text as it is, line endings and all: the edit keeps what it does not change.
        before = None if raw is None else raw.decode("utf-8")
    except UnicodeDecodeError:
        raise HostConfigError(f"{target}: not UTF-8 text") from None
    after = change(before or "")
    if after == before:
        mode = target.stat().st_mode & 0o7777
        if private and mode & 0o077:
            os.chmod(target, mode & ~0o077)
            return Written(target, None, False, True)
        return Written(target, None, False)
    try:
        data = after.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise HostConfigError(
            f"cannot write {target}: the entry holds {after[exc.start : exc.end]!r}, which is "
            "not UTF-8 text (a file name in another encoding?)"
        ) from None
    mode, owner = 0o600, None
    tightened = False
    backup = None
    try:
        if raw is not None:
            st = target.stat()
            mode = st.st_mode & 0o7777
            if os.geteuid() == 0:
                owner = (st.st_uid, st.st_gid)
            if private and mode & 0o077:
                # The token lets whoever reads it act as the daemon's owner (any profile,
                # a reload): a host's usual 0644 would hand it to every local user.
                mode &= ~0o077
                tightened = True
            name = _backup_name(target)
            write_atomically(name, raw, mode=mode, owner=owner)
            backup = name
            os.utime(backup, ns=(st.st_atime_ns, st.st_mtime_ns))
        check = _unchanged(target, raw)
        write_atomically(target, data, mode=mode, owner=owner, before_rename=check)
    except BaseException:
        # No backup of a file that was not replaced.
        if backup is not None:
            with contextlib.suppress(OSError):
                os.unlink(backup)
        raise
    return Written(target, backup, True, tightened)


def _unchanged(target: Path, raw: bytes | None) -> Callable[[int], None]:
    def check(dir_fd: int) -> None:
        if _read(target, dir_fd) != raw:
            raise _Changed

    return check


def real_path(path: Path) -> Path:
    """Where the file really is, its links followed one at a time and each judged."""
    real = Path(path.absolute().anchor)
    todo = list(reversed(path.absolute().parts[1:]))
    links = 0
    while todo:
        part = todo.pop()
        if part == "..":
            real = real.parent  # ``real`` holds no link, so its parent is the real one
            continue
        step = real / part
        if not step.is_symlink():
            real = step
            continue
        links += 1
        if links > MAX_LINKS:
            raise HostConfigError(f"{path}: too many symbolic links on the way (a loop?)")
        _judge_link(real, step)
        points_to = Path(os.readlink(step))
        if points_to.is_absolute():
            real = Path(points_to.anchor)
        todo += reversed(points_to.parts[1:] if points_to.is_absolute() else points_to.parts)
    return real


def _judge_link(directory: Path, link: Path) -> None:
    os.close(open_directory(str(directory)))  # refuses one another user owns or can write
    owner = link.lstat().st_uid
    if owner not in trusted_owners():
        raise UnsafeFileError(
            f"{not_trusted(str(link), owner)}: its owner could point it anywhere; give the "
            "path it points to instead"
        )


def _backup_name(target: Path) -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d%H%M%S")
    candidate = target.with_name(f"{target.name}.bak-{stamp}")
    n = 1
    while candidate.exists():  # twice within a second: keep both
        candidate = target.with_name(f"{target.name}.bak-{stamp}-{n}")
        n += 1
    return candidate
