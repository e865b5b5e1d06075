"""POSIX access ACLs written as the kernel keeps them (the ``system.posix_acl_access``
attribute), for the tests of who else may write a file or a directory."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

_TAGS = {"user": 0x02, "group": 0x08}
_ANY = 0xFFFFFFFF  # the id of an entry that names no one


def acl(*named: tuple[str, int, int], mask: int = 0o6) -> bytes:
    """The owner rw, its group r, others r, and ``named`` entries ("user" or "group",
    id, permissions) within ``mask``."""
    entries = [(0x01, 0o6, _ANY), (0x04, 0o4, _ANY), (0x10, mask, _ANY), (0x20, 0o4, _ANY)]
    entries += [(_TAGS[kind], perms, ident) for kind, ident, perms in named]
    # The kernel takes them ordered by tag, then id.
    entries.sort(key=lambda e: (e[0], e[2]))
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)


def with_acl(path: Path, value: bytes) -> None:
    """Give ``path`` the ACL ``value``, or skip where the filesystem has none."""
    try:
        os.setxattr(path, "system.posix_acl_access", value)
    except OSError as exc:
        pytest.skip(f"no POSIX ACLs here: {exc.strerror}")
