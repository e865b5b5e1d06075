"""A profile's ``allow``/``deny`` patterns (``mcpd.config.tables.profiles``), as its view holds
tools, prompts and resources to them: a name as the server spells it, and for ``deny``
as agents know it too (``facing.spellings``; an ``allow`` read that way would admit a
look-alike of the name it lists), a resource's URI in every spelling a server may read
as the same (``UriFilter``)."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import Final

from protocol.mcp import uri_spellings

from ...config.tables.profiles import Patterns, split_pattern
from ..naming.facing import spellings

# A ``file`` URI pattern, whatever host it names (``uri_spellings`` reads any as this
# machine's), and its path.
_FILE_PATTERN: Final = re.compile(r"file:(?://[^/]*)?(/.*)", re.IGNORECASE | re.DOTALL)


class NameFilter:
    """``allow``/``deny`` patterns over ``(alias, name)``: see ``mcpd.config.tables.profiles``."""

    def __init__(self, patterns: Patterns) -> None:
        self.allow = [split_pattern(p) for p in patterns.allow]
        self.deny = [split_pattern(p) for p in patterns.deny]
        self.everything = not self.allow and not self.deny

    @staticmethod
    def _match(rule: tuple[str | None, str], alias: str, name: str) -> bool:
        server, pattern = rule
        return _names(server, alias) and fnmatchcase(name, pattern)

    def admits(self, alias: str, name: str) -> bool:
        if self.allow and not any(self._match(r, alias, name) for r in self.allow):
            return False
        return not any(self._match(r, alias, f) for r in self.deny for f in spellings(name))


class UriFilter(NameFilter):
    """``allow``/``deny`` patterns over ``(alias, uri)``, held against the spellings a
    server may read as the same resource (``uri_spellings``): a deny that matches the URI
    as written, as any reading has it or without its query keeps it out, and an allow
    must match it as written and as every reading has it. Each pattern counts as
    written and as read, so that one written with escapes or dots still matches what
    it names.

    A deny that names a path, as a ``file`` URI or as an absolute path, keeps out
    every URI whose path matches it too (``uri_spellings.paths``), under any scheme or none:
    a server that reads a URI by its path alone opens that file for ``/p`` or ``x:/p``
    as for ``file:///p``. It keeps out every URI whose path climbs out of the server's
    working directory as well (``uri_spellings.climbs``), since such a path may land on the
    file it names from wherever that directory is."""

    def __init__(self, patterns: Patterns) -> None:
        super().__init__(patterns)
        self.allow = _as_read_too(self.allow)
        self.deny = _as_read_too(self.deny)
        named = ((server, _path_of(pattern)) for server, pattern in self.deny)
        self.path_deny = list(dict.fromkeys((s, p) for s, p in named if p is not None))

    def rules(self) -> tuple[tuple[tuple[str | None, str], ...], ...]:
        """The patterns, as a key: two filters of the same ones judge every URI alike."""
        return tuple(self.allow), tuple(self.deny)

    def admits_uri(self, alias: str, uri: str) -> bool:
        if self.everything:
            return True
        written, read, bare = uri_spellings.forms(uri)
        if self.allow and not all(
            any(self._match(r, alias, form) for r in self.allow) for form in (written, *read)
        ):
            return False
        if any(self._match(r, alias, f) for r in self.deny for f in (written, *read, *bare)):
            return False
        rules = [(server, path) for server, path in self.path_deny if _names(server, alias)]
        if not rules:
            return True
        if uri_spellings.climbs(uri):
            return False
        return not any(fnmatchcase(p, path) for _, path in rules for p in uri_spellings.paths(uri))


def _names(server: str | None, alias: str) -> bool:
    """Whether a pattern's server part (None: every server) names ``alias``."""
    return server is None or fnmatchcase(alias, server)


def _path_of(pattern: str) -> str | None:
    """The path a pattern names, as a ``file`` URI or as an absolute path, or None."""
    if pattern.startswith("/"):
        return pattern
    named = _FILE_PATTERN.fullmatch(pattern)
    return named.group(1) if named else None


def _as_read_too(rules: list[tuple[str | None, str]]) -> list[tuple[str | None, str]]:
    read = [(server, uri_spellings.read_as(pattern)) for server, pattern in rules]
    return rules + [rule for rule in read if rule not in rules]
