"""The directories above what a sandbox hides, made mount points so that the server
cannot move them. Sans-IO.

A hidden directory is covered where it is: a mount follows the directory, not its
path. A server that renamed a directory above it (``~/.local/state``, above mcpd's
state) would take it, covered, to a path no later sandbox hides, and the next start
would cover whatever the server left at the old path. The kernel refuses to rename or
remove a mount point, in the namespace it is one in and in every namespace made from
it, where the server cannot unmount what it was given. So each such directory the
server could write to is bound onto itself; it shows what it showed before.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from .mounts import KERNEL_DIRS
from .plan import Level, Mount, within


def fixed_dirs(mounts: Sequence[Mount], home: str, level: Level) -> list[Mount]:
    """The ``fixed`` mounts for ``mounts`` (resolved paths), in a sandbox of ``level``
    whose home is ``home``: every directory above a hidden path that the server may
    write to, where nothing is mounted already."""
    shown = [*mounts, Mount(home, "write")]
    taken = {m.path for m in shown}
    found: dict[str, Mount] = {}
    for m in mounts:
        if not m.kind.startswith("hide"):
            continue
        above = posixpath.dirname(m.path)
        while above != "/":
            if above not in taken and above not in found and writable(above, shown, level):
                found[above] = Mount(above, "fixed")
            above = posixpath.dirname(above)
    return sorted(found.values(), key=lambda m: m.path)


def writable(path: str, shown: Sequence[Mount], level: Level) -> bool:
    """Whether ``path`` is the host's and the server may change it: the deepest mount
    it lies in (a grant over a hidden path at the same place) is a write grant or the
    home, or, at the default level, there is none (the host's root, shown as it is)."""
    # bubblewrap mounts its own there; nothing above a hidden path in them is the host's.
    if any(within(path, k) for k in KERNEL_DIRS):
        return False
    around = [m for m in shown if within(path, m.path)]
    if not around:
        return level == "default"
    deepest = max(around, key=lambda m: (m.path.count("/"), not m.kind.startswith("hide")))
    return deepest.kind == "write"
