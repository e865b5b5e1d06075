"""What a path named when it was looked at: the file a sandbox covers by its path, kept
so that a path that later names another file is noticed (``stdio.sandbox.secret_folders``).

Its own module, as both the transports' base (what a started server's sandbox covered,
``base.Started``) and the stdio sandbox's plan hold it.
"""

from __future__ import annotations

import msgspec


class PathIdentity(msgspec.Struct, frozen=True):
    """What a path named: its device and inode, or None where nothing was there."""

    path: str
    key: tuple[int, int] | None
