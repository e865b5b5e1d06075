"""``[profiles.NAME]``: what one kind of agent sees of the aggregated servers.

A profile is a view: which servers (aliases, globs allowed), which of their tools,
prompts and resources (allow/deny patterns), under which names (a template and length
of its own), how many tools a host takes before the list is replaced by tool search,
and where agents reach it (a socket of its own, with its own mode and peers).

Patterns are globs. One with a ``/`` matches ``ALIAS/NAME`` (``git/git_*``,
``*/delete_*``); one without matches the name on any of the profile's servers
(``read_*``). NAME is the tool's name after the server's own curation (``rename``),
a prompt's name, or a resource's URI (``notes/file:///srv/*``; a bare URI pattern
such as ``file:///srv/*`` has no alias, since an alias never holds a ``:``). ``allow``
keeps only what it matches (empty: everything), ``deny`` then removes from what is left.

These structs only describe; the checks are in ``endpoints`` and the view itself is
``mcpd.registry.profiles.views``.
"""

from __future__ import annotations

import os
from typing import Final, Literal

import msgspec

DEFAULT_PROFILE: Final = "default"
DiscoveryMode = Literal["all", "search", "auto"]


class Patterns(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    allow: list[str] = msgspec.field(default_factory=list)
    deny: list[str] = msgspec.field(default_factory=list)

    @property
    def everything(self) -> bool:
        return not self.allow and not self.deny


class ProfileConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    servers: list[str] = msgspec.field(default_factory=lambda: ["*"])
    tools: Patterns = msgspec.field(default_factory=Patterns)
    prompts: Patterns = msgspec.field(default_factory=Patterns)
    resources: Patterns = msgspec.field(default_factory=Patterns)
    # None: the [naming] table's value.
    template: str | None = None
    max_length: int | None = None
    # The tool cap: "auto" searches above it, "all" lists everything and warns. None:
    # [daemon] max_tools.
    max_tools: int | None = None
    discovery: DiscoveryMode = "all"
    pinned: list[str] = msgspec.field(default_factory=list)  # patterns, always listed
    socket: str | None = None
    socket_mode: str = "0600"
    allow_uids: list[int] = msgspec.field(default_factory=list)
    allow_groups: list[str] = msgspec.field(default_factory=list)
    # Servers (aliases, globs allowed) whose processes may use this profile as agents:
    # a connection from a server's process is refused unless a profile names it.
    allow_servers: list[str] = msgspec.field(default_factory=list)


EVERYTHING: Final = ProfileConfig()


def socket_where(profile: ProfileConfig) -> tuple[str, int]:
    """Where a profile's socket goes (absolute), and its mode."""
    return os.path.abspath(profile.socket or ""), int(profile.socket_mode, 8)


def split_pattern(pattern: str) -> tuple[str | None, str]:
    """``(alias pattern or None, name pattern)`` of a profile pattern."""
    alias, slash, name = pattern.partition("/")
    if slash and ":" not in alias:
        return alias, name
    return None, pattern
