"""A profile that matches no tool once its servers have listed theirs, as a config
error: the patterns that match nothing, quoted, each with the tool name or server
alias it was most likely meant to be."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from fnmatch import fnmatchcase

from ...config.tables.model import ConfigError, NamingConfig
from ...config.tables.profiles import Patterns, ProfileConfig, split_pattern
from ..tables.catalog import Catalog
from ..tables.shown import Entry
from .filters import NameFilter
from .views import ProfileView


def unmatched(
    profiles: Mapping[str, ProfileConfig],
    registry: Catalog,
    naming: NamingConfig,
    aliases: Collection[str],
    unknown: Collection[str] = (),
) -> ConfigError | None:
    """The first profile that matches no tool, or a pinned pattern that matches none of
    its tools, as a config error; judged only where every server the profile names has
    listed its tools (``aliases`` are the configured servers, ``unknown`` those whose
    lists do not count, as they are about to change)."""
    listed = set(registry.aliases()) - set(unknown)
    for name, profile in profiles.items():
        view = ProfileView(name, registry)
        view.configure(profile, naming, 1 << 30)
        mine = [a for a in aliases if view.has_server(a)]
        if not mine or any(a not in listed for a in mine):
            continue
        entries = view.entries()
        if not entries:
            key = "tools" if not profile.tools.everything else "servers"
            theirs = [e for e in registry.entries() if e.alias in mine]
            missed = _missed(profile.tools.allow, theirs, mine)
            return ConfigError(
                f"profiles.{name}.{key}",
                f"matches no tool of {', '.join(sorted(mine))}{missed}",
            )
        for i, pattern in enumerate(profile.pinned):
            rule = NameFilter(Patterns(allow=[pattern]))
            if not any(rule.admits(e.alias, e.name) for e in entries):
                meant = "".join(
                    f' (did you mean "{m}"?)' for m in _meant(pattern, entries, mine) or []
                )
                return ConfigError(
                    f"profiles.{name}.pinned[{i}]",
                    f"{pattern!r} matches none of its tools{meant}",
                )
    return None


def _missed(allow: Sequence[str], entries: Sequence[Entry], aliases: Sequence[str]) -> str:
    """What to add to the error of a profile whose ``allow`` patterns admit none of
    ``entries``: each pattern that matches nothing, quoted, with what it was likely
    meant to be."""
    said = [
        f'"{pattern}"' + "".join(f' (did you mean "{m}"?)' for m in meant)
        for pattern in allow
        if (meant := _meant(pattern, entries, aliases)) is not None
    ]
    if not said:
        return ""
    return f": {', '.join(said)} {'matches' if len(said) == 1 else 'match'} none of them"


def _meant(pattern: str, entries: Sequence[Entry], aliases: Sequence[str]) -> list[str] | None:
    """None if ``pattern`` matches a tool of ``entries``; else the pattern with the tool
    name, or the server alias, nearest to what it names in their place, if one is near."""
    server, name = split_pattern(pattern)
    servers = [a for a in aliases if server is None or fnmatchcase(a, server)]
    if not servers:  # a server part that names none of the profile's servers
        return [f"{n}/{name}" for n in difflib.get_close_matches(server or "", aliases, n=1)]
    names = sorted({e.name for e in entries if e.alias in servers})
    if any(fnmatchcase(n, name) for n in names):
        return None
    near = difflib.get_close_matches(name, names, n=1)
    return [pattern[: len(pattern) - len(name)] + n for n in near]
