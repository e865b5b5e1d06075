"""A system directory shown as a view of its own, built of what others may read, as
bubblewrap arguments. Sans-IO: ``root_view`` finds what the view holds.

A directory bound whole shows whatever is put in it later; a file bound, or covered,
by itself is a mount on the file it was at the start, and the kernel drops that mount
in every other namespace when a file is renamed over it (as ``passwd`` replaces
``/etc/shadow``), showing what is under it then. Built here, what is under each
entry is the view's own memory, read-only: an entry replaced on the host after the
start shows, at worst, empty or as it was, and what was left out is not there to show.
"""

from __future__ import annotations

from typing import Literal

import msgspec


class ViewEntry(msgspec.Struct, frozen=True):
    """An entry of a built view."""

    path: str
    # "bound": a file, or a directory with nothing in it others may not read, bound
    # read-only; "made": a directory built of its own entries; "link": a symbolic link,
    # made anew to lead where it leads.
    kind: Literal["bound", "made", "link"]
    target: str = ""  # where a link leads, as read


class BuiltView(msgspec.Struct, frozen=True):
    """A directory ``root`` shown as ``entries`` (parents before what lies in them)."""

    root: str
    entries: tuple[ViewEntry, ...] = ()

    def args(self) -> list[str]:
        """The view, left writable for what is mounted in it after: ``mounts.sealed``
        closes it."""
        args = ["--perms", "0755", "--tmpfs", self.root]
        for e in self.entries:
            if e.kind == "made":
                args += ["--perms", "0755", "--dir", e.path]
            elif e.kind == "link":
                args += ["--symlink", e.target, e.path]
            else:
                # One gone since it was found is left out, as it would be now.
                args += ["--ro-bind-try", e.path, e.path]
        return args
