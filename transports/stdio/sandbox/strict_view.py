"""Whether a strict sandbox shows what a server's start needs: its command, what the
kernel opens to run it, and its working directory. Sans-IO: the host finds where the
links lead and what a ``#!`` line names (``opened``); this decides.

What the kernel runs is more than the file the config names: a symbolic link on the way
leads elsewhere (a virtualenv's ``bin/python`` into the Python it was made from, which
pyenv, uv and conda keep under the user's home), and a script is run by the interpreter
its ``#!`` line names. A file among them that the sandbox does not show fails the exec
with "No such file or directory" for the command, which exists: so each is checked
here, and the one missing is named with the key to grant its folder by. None of them is
shown unasked: a strict server sees what its config names, and a link in a granted
folder, which whoever may write that folder can point anywhere, would otherwise choose
what else it sees.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

import msgspec


class OpenedToRun(msgspec.Struct, frozen=True):
    """A file the kernel opens to start a server's command, besides the command as
    found: where a symbolic link on the way leads, or the interpreter its ``#!`` line
    names, or where a link on the way to that leads."""

    path: str  # in its folder's real path, as a strict sandbox must show it
    how: str  # why the start needs it ("its command ... is a link that leads there")
    # The folder to grant: the installation it lies in (``X`` for ``X/bin/python3``
    # beside ``X/lib``), whose libraries it needs as well; else its own folder.
    folder: str
    installed: bool = False  # ``folder`` is its installation, not its own folder


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def in_view(path: str, roots: Sequence[str]) -> bool:
    """Whether ``path`` (normalised: ``/usr/../home`` is not in ``/usr``) lies in one
    of ``roots``, which are real paths."""
    path = posixpath.normpath(path)
    return any(within(path, root) for root in roots)


def unseen(
    where: str,
    command: str,
    opened: Sequence[OpenedToRun],
    cwd: str,
    roots: Sequence[str],
    installation: str | None = None,
) -> str | None:
    """Why a strict server, its config key ``where``, cannot start in a sandbox that
    shows ``roots`` (and what lies in them): the first of its command, what the kernel
    opens to run it and its working directory that is not shown, and the key to grant
    it by. ``installation``: the one the command lies in, when it is in one's ``bin``.
    None when all are shown. Each is named as it is once normalised (``a/../b`` is
    ``b``), which is where the check looks for it."""
    command, cwd = posixpath.normpath(command), posixpath.normpath(cwd)
    if not in_view(command, roots):
        what = (
            "its folder"
            if installation is None
            else f"the folder it is installed in, {installation},"
        )
        return (
            f"{where}: its command {command} is outside what a strict sandbox shows; add "
            f"{what} to {where}.read"
        )
    for o in opened:
        if not in_view(o.path, roots):
            what = "the folder it is installed in" if o.installed else "its folder"
            return (
                f"{where}: {o.path} is outside what a strict sandbox shows, and its command "
                f"cannot run without it ({o.how}); add {what}, {o.folder}, to {where}.read"
            )
    if not in_view(cwd, roots):
        return (
            f"{where}.cwd: {cwd} is outside what a strict sandbox shows; add it to "
            f"{where}.read or {where}.write"
        )
    return None
