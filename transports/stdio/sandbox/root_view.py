"""What a strict sandbox shows of the system's directories when mcpd runs as root.

A root mcpd's server runs as root in its user namespace, without capabilities, and the
kernel still lets it read what root owns and may read (and what root's group may),
in every directory the sandbox shows: ``/etc/shadow``, the SSH host keys, TLS keys in
``/etc/ssl/private``, a database's ``pg_hba.conf``. So, under a root mcpd, a strict
sandbox covers in ``/etc``, as each server starts, every file others may not read and
every directory others may not enter, each as a hidden one is covered (an empty
read-only file or directory); and it does not show ``/opt``, too large to search at
each start (an installation there is granted by ``read``, as one elsewhere is).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from typing import Final

from .plan import Mount

# Searched at each start for what others may not read.
SEARCHED: Final = ("/etc",)
# Not shown unless granted.
UNSHOWN: Final = ("/opt",)


def owner_only(roots: Sequence[str]) -> list[Mount]:
    """The covers for what lies in ``roots`` that others may not read: a file others
    may not read (``hide_file``), a directory others may not enter (``hide_dir``, and
    nothing in it looked at). Symbolic links are not followed: what one leads to is
    covered, or not, where it lies."""
    found: list[Mount] = []
    waiting = [r for r in roots if os.path.isdir(r) and not os.path.islink(r)]
    while waiting:
        directory = waiting.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue  # gone, or not for root either: nothing of it shown is readable
        for entry in entries:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if mode & stat.S_IXOTH:
                    waiting.append(entry.path)
                else:
                    found.append(Mount(entry.path, "hide_dir"))
            elif not stat.S_ISLNK(mode) and not mode & stat.S_IROTH:
                found.append(Mount(entry.path, "hide_file"))
    return sorted(found, key=lambda m: m.path)
