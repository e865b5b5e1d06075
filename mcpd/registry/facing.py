"""What agents know a server's item by, among that server's items: one name for two
of the server's names when agents cannot tell them apart.

A server names its own items, and agents get each tool or prompt under a local name
made from that name (renamed by the operator's rules, then every character outside
``[A-Za-z0-9_-]`` made ``_``: ``registry.table``), and read, through a template, any
URI it matches, whatever its variables are called and whatever query or fragment it
adds. So ``send.mail`` reaches agents as ``send_mail`` did, and ``notes://{note}``
and ``notes://{id}{?v}`` read what ``notes://{id}`` read. An
item a server lists under a new name that agents know as an item pinned under
another is judged as a change of that item (``Namesakes``), not as a new one: else a
server could change an approved item by renaming it, and agents would get the new
text under the name they trusted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

from protocol import uritemplate

from .pins import Kind

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_-]")


def sanitize(name: str) -> str:
    return _UNSAFE.sub("_", name)


def facing(kind: Kind, name: str, renames: Mapping[str, str]) -> str:
    """What agents know the item the server calls ``name`` by, within its server."""
    if kind == "template":
        return uritemplate.path_shape(name)
    return sanitize(renames.get(name, name))


class Namesakes:
    """One list's pins by what agents know each item by."""

    __slots__ = ("_by_facing", "_kind", "_renames")

    def __init__(self, kind: Kind, pinned: Iterable[str], renames: Mapping[str, str]) -> None:
        self._kind = kind
        self._renames = renames
        # Of several pins agents know alike, the one pinned last.
        self._by_facing = {facing(kind, name, renames): name for name in pinned}

    def of(self, name: str) -> str | None:
        """The name of a pin agents know as they would know ``name`` (which has none
        of its own), if there is one."""
        return self._by_facing.get(facing(self._kind, name, self._renames))
