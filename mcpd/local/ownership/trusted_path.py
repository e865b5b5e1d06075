"""Whether a file whose words decide what mcpd runs or whom it believes (the config, a
secret file, a CA bundle, a server's program) could have been written by another local
user: the file itself, by its owner, mode and ACL, and every directory and symbolic
link on the way to it, in any of which they could put another file in its place.

Only mcpd's own user and root may have written such a file: not even the mcpd service
user, which runs servers nobody here wrote, so that a file it could change never
decides what root or a person's own mcpd runs. A directory that others may write to is
fine on the way when it is sticky (as ``/tmp`` is: there only an entry's owner may
replace or remove it).
"""

from __future__ import annotations

import os
import stat
from collections import deque
from typing import Final

from .owners import acl_of, other_writers, user_name

# Symbolic links followed on the way to a file, at most (the kernel's own bound).
_MAX_LINKS: Final = 40


def untrusted_file(path: str, st: os.stat_result) -> str | None:
    """Why what the file (or directory) at ``path`` holds may be another user's choice,
    or None; ``st`` is its status as it was opened."""
    owners = frozenset({os.geteuid(), 0})
    if st.st_uid not in owners:
        own = "a directory" if stat.S_ISDIR(st.st_mode) else "a copy"
        return f"{_not_yours(path, st.st_uid)}; make it yours (chown) or use {own} of your own"
    who = other_writers(st, acl_of(path))
    if who is not None:
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX:
            return (
                f"{path} is shared: {who} may add files to it (mode {mode:04o}); "
                "use a directory of your own"
            )
        return f"{path} can be written by {who} (mode {mode:04o}); run chmod go-w {path}"
    return _untrusted_way(path, st, owners)


def untrusted_way(path: str) -> str | None:
    """Why another user could put a file or directory of their own at ``path``, which
    need not exist yet: by the directories and links on the way to it, as far as they
    exist (what is missing, mcpd makes itself); or None."""
    return _untrusted_way(path, None, frozenset({os.geteuid(), 0}))


def _not_yours(what: str, uid: int) -> str:
    mine = os.geteuid()
    allowed = "root" if mine == 0 else f"you (uid {mine}) or root"
    return f"{what} belongs to uid {uid} ({user_name(uid)}), not to {allowed}"


def _untrusted_way(path: str, st: os.stat_result | None, owners: frozenset[int]) -> str | None:
    """Why the directories and links on the way to ``path`` let another user put a file
    of theirs there, or None; also when what is there now is not the file opened
    (``st``; None: nothing was, and the way may end before ``path`` does)."""
    todo = deque((path if path.startswith("/") else os.path.join(os.getcwd(), path)).split("/"))
    at, links = "/", 0
    while todo:
        name = todo.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            at = os.path.dirname(at)  # each directory is checked on the way down
            continue
        problem = _untrusted_directory(at, owners)
        if problem is not None:
            return problem
        step = os.path.join(at, name)
        try:
            entry = os.lstat(step)
        except FileNotFoundError as exc:
            if st is None:
                return None
            return f"cannot look at {step} on the way to {path}: {exc.strerror}"
        except OSError as exc:
            return f"cannot look at {step} on the way to {path}: {exc.strerror}"
        if stat.S_ISLNK(entry.st_mode):
            if entry.st_uid not in owners:
                owner = _not_yours(step, entry.st_uid)
                return f"the symbolic link {owner}, who chose where it points"
            links += 1
            if links > _MAX_LINKS:
                return f"{path} goes through too many symbolic links"
            target = os.readlink(step)
            if target.startswith("/"):
                at = "/"
            todo.extendleft(reversed(target.split("/")))
            continue
        if any(n not in ("", ".") for n in todo):
            at = step
            continue
        if st is not None and (entry.st_dev, entry.st_ino) != (st.st_dev, st.st_ino):
            return f"{path} was replaced while mcpd read it"
    return None


def _untrusted_directory(directory: str, owners: frozenset[int]) -> str | None:
    try:
        st = os.stat(directory)
    except OSError as exc:
        return f"cannot look at {directory}: {exc.strerror}"
    if st.st_uid not in owners:
        owner = _not_yours(directory, st.st_uid)
        return f"the directory {owner}, who could put another file in its place"
    who = other_writers(st, acl_of(directory))
    if who is not None and not st.st_mode & stat.S_ISVTX:
        return (
            f"the directory {directory} can be written by {who}, who could put another "
            f"file in its place; run chmod go-w {directory}"
        )
    return None
