"""What a strict sandbox shows of the system's directories when mcpd runs as root.

A root mcpd's server runs as root in its user namespace, without capabilities, and the
kernel still lets it read what root owns and may read (and what root's group may),
in every directory the sandbox shows: ``/etc/shadow``, the SSH host keys, TLS keys in
``/etc/ssl/private``, a database's ``pg_hba.conf``. So, under a root mcpd, a strict
sandbox shows ``/etc`` as a view built at each start of what others may read
(``built_view``): a file others may not read, and a directory others may not enter, are
not in it. A directory is bound whole where nothing in it is left out, and built of its
entries otherwise. It does not show ``/opt``, too large to search at each start (an
installation there is granted by ``read``, as one elsewhere is).
"""

from __future__ import annotations

import os
import stat
from typing import Final

from .built_view import BuiltView, ViewEntry

# ViewEntry as a view built at each start of what others may read.
BUILT: Final = ("/etc",)
# Not shown unless granted.
UNSHOWN: Final = ("/opt",)


def others_view(root: str) -> BuiltView:
    """``root`` as others may read it. Symbolic links are not followed: each is made
    anew, and what it leads to is shown, or not, where it lies."""
    return BuiltView(root, tuple(_entries(root)))


def _entries(directory: str) -> list[ViewEntry]:
    """What others may read in ``directory``, parents before what lies in them."""
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return []  # gone, or not for root either: nothing of it is shown
    found: list[ViewEntry] = []
    for entry in entries:
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                found.append(ViewEntry(entry.path, "link", os.readlink(entry.path)))
            elif stat.S_ISDIR(mode):
                if mode & stat.S_IXOTH:
                    found += _directory(entry.path)
            elif mode & stat.S_IROTH:
                found.append(ViewEntry(entry.path, "bound"))
        except OSError:
            continue  # gone since it was listed
    return found


def _directory(path: str) -> list[ViewEntry]:
    inside = _entries(path)
    if _holds_all(path, inside):
        return [ViewEntry(path, "bound")]
    return [ViewEntry(path, "made"), *inside]


def _holds_all(path: str, inside: list[ViewEntry]) -> bool:
    """Whether ``inside`` is all that lies in ``path``, each bound or a link: nothing
    left out, anywhere below."""
    if any(e.kind == "made" for e in inside):
        return False
    try:
        return len(os.listdir(path)) == sum(os.path.dirname(e.path) == path for e in inside)
    except OSError:
        return False
