"""A file a person names for a command's output (``mcpd pins export -o FILE``), written
without following a link someone else may have made, and never through one at its name.

The directory is found as a host's config file is (``hosts.hostfile.real_path``): a link on
the way is followed only when it is the user's (or root's) in a directory no other
user can write. The name itself is never followed. Without ``force`` the file is
created there exclusively (``O_CREAT|O_EXCL|O_NOFOLLOW``), so anything already there,
a link to nowhere included, is refused and left as it is; with ``force`` a temporary
file created the same way beside it is renamed over the name, which replaces a link
there rather than writing where it points. Either way the file, then its directory, is
synced before the command says it is written (``privatefile.write_in``).

The file gets the mode a shell's ``>`` would give it (0666 less the umask): it holds
what the command prints to stdout without ``-o``, nothing more private.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from protocol.shown.visible import visible

from ...local.state.privatefile import UnsafeFileError, open_directory, write_in
from ..hosts.hostfile import HostConfigError, real_path


class OutputExists(OSError):
    """Something is at the name already and ``force`` was not given; the message says
    what (a link is named as one)."""


def write_output(path: str, data: bytes, *, force: bool) -> None:
    """Write ``data`` as the file ``path``. Raises OutputExists without ``force`` when
    the name is taken, UnsafeFileError for a directory reached through a link that is
    not to be trusted, OSError for what the system refuses."""
    directory, name = os.path.split(resolved(path))
    dir_fd = open_directory(directory, check=False)
    try:
        write_in(dir_fd, name, data, mode=None, replace=force)
    except FileExistsError:
        raise OutputExists(taken(path) or f"{path} exists (use --force to replace it)") from None
    finally:
        os.close(dir_fd)


def resolved(path: str) -> str:
    """``path`` with the links on the way to its directory followed where that is safe
    (``hosts.hostfile.real_path``), its last part as given; raises UnsafeFileError for a link
    that may be another user's, or a path that names no file."""
    directory, name = os.path.split(path)
    if name in ("", ".", ".."):
        raise UnsafeFileError(f"{path} names a directory, not a file")
    try:
        return str(real_path(Path(directory or ".")) / name)
    except HostConfigError as exc:
        raise UnsafeFileError(str(exc)) from None


def taken(path: str) -> str | None:
    """What refuses ``path`` to a command without ``--force``: a link there (dangling or
    not) named as one, or anything else there; None when the name is free."""
    try:
        st = os.lstat(path)
    except OSError:
        return None  # nothing there, or no way there: writing it says which
    if stat.S_ISLNK(st.st_mode):
        try:
            to = f" to {visible(os.readlink(path))}"
        except OSError:
            to = ""
        return (
            f"{path} is a symbolic link{to}, which mcpd does not write through "
            "(--force replaces the link itself, leaving what it points to alone)"
        )
    return f"{path} exists (use --force to replace it)"
