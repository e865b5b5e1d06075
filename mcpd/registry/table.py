"""The aggregated tool table: local names <-> (alias, original name), and what agents see.

Local names come from the configured alias and the template, never from the server's
own name for itself. Characters outside ``[A-Za-z0-9_-]`` become ``_``; a name that is
too long, or that two tools would share, ends in ``_`` and a short hash of
``alias::tool`` instead, so it stays unique and stable across restarts.

Anyone can compute a hashed name, so a server could list it as a plain name of its own
to take it over. A hashed name therefore outranks a plain name: the tool whose plain
name it is gets a hashed name instead. Which tool wins never depends on which server
listed first, so the names come out the same after every restart.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Iterable, Sequence
from typing import Final, TypeAlias

import msgspec

from protocol import mcp

from ..config.model import NamingConfig
from ..config.servertable import ToolsConfig
from .curation import curate
from .facing import sanitize
from .gate import Gate
from .shown import Entry

_encode: Final = msgspec.json.Encoder().encode

# A SHA-1 digest has no more digits than this; a longer hash could never differ.
_MAX_DIGITS: Final = 40


def most_digits(max_length: int) -> int:
    """The longest hash a name may end in, leaving a character of its own before it."""
    return min(_MAX_DIGITS, max_length - 2)


def candidate_name(template: str, alias: str, tool: str) -> str:
    # Aliases cannot contain braces, so substituting the alias first is unambiguous.
    return sanitize(template.replace("{alias}", alias).replace("{tool}", tool))


def hashed_name(candidate: str, alias: str, tool: str, max_length: int, digits: int = 6) -> str:
    digest = hashlib.sha1(f"{alias}::{tool}".encode()).hexdigest()[:digits]
    return f"{candidate[: max_length - digits - 1]}_{digest}"


def alias_prefix(template: str, alias: str) -> str:
    return sanitize(template.split("{tool}", 1)[0].replace("{alias}", alias))


# What a tools/list holds: the table's entries, and tools of mcpd's own (search mode's).
Listed: TypeAlias = "Entry | mcp.Tool"


def listed_name(item: Listed) -> str:
    return item.local if isinstance(item, Entry) else item.name


class _Server:
    __slots__ = (
        "available",
        "flags",
        "held",
        "judged",
        "marker",
        "originals",
        "raw",
        "tools",
        "trusted",
    )

    def __init__(
        self,
        raw: dict[str, mcp.Tool],
        trusted: bool,
        rules: ToolsConfig | None,
        gate: Gate,
        alias: str,
    ) -> None:
        self.raw = raw  # as the server listed them
        # Cleaned, and held where the pins say so.
        self.judged = judged = gate.tools(alias, raw, rules.rename if rules else None)
        # Why each held tool is held, by the server's own name.
        self.held = judged.held
        curated = curate(judged.shown, rules)
        self.tools = curated.tools  # what agents see, by name before the template
        self.originals = curated.originals
        self.trusted = trusted
        self.available = True
        self.marker: str | None = None
        self.flags: tuple[bool, str | None] = (trusted, None)  # shared by its entries

    def set_state(self, available: bool, marker: str | None) -> None:
        self.available, self.marker = available, marker
        self.flags = (self.trusted, marker)

    def entry(self, local: str, alias: str, name: str) -> Entry:
        """A new entry for the tool agents know as ``name`` (before the template)."""
        original = self.originals.get(name, name)
        entry = Entry(local, alias, original, self.tools[name], name)
        held = self.held.get(original) if self.held else None
        if held is None:
            entry.available = self.available
            entry.reflag(self.flags)
        else:
            entry.available = False
            entry.held = held
            entry.reflag((self.trusted, f"held: {held}"))
        return entry


class Registry:
    def __init__(self, naming: NamingConfig, gate: Gate | None = None) -> None:
        self.naming = naming
        # Every list passes it: cleaned, pinned, held (a table of its own by default).
        self.gate = gate if gate is not None else Gate()
        self._servers: dict[str, _Server] = {}
        self._by_local: dict[str, Entry] = {}
        self._by_key: dict[tuple[str, str], Entry] = {}
        # Who wants each candidate name: almost always one tool, so a tuple of the same
        # key objects ``_by_key`` holds (a list and a key of its own were 165 B a tool).
        self._claims: dict[str, tuple[tuple[str, str], ...]] = {}
        self._listing: list[Entry] | None = None
        self._rules: dict[str, ToolsConfig] = {}
        self.version = 0

    # -- changes --

    def update(self, alias: str, tools: Sequence[mcp.Tool], *, trusted: bool = False) -> bool:
        """Replace one server's tools. Returns whether anything agents see changed."""
        new = {t.name: t for t in tools}
        old = self._servers.get(alias)
        if old is not None and old.trusted == trusted and _same_tools(old.raw, new):
            return False
        self._install(alias, new, trusted)
        return True

    def read_ahead(self, alias: str, tool: mcp.Tool) -> None:
        """Do the costly part of judging one tool of a list ``update`` is about to get
        (cleaning and checking it), leaving what agents see as it is."""
        self.gate.read_ahead(alias, "tool", tool.name, tool)

    def set_rules(self, alias: str, rules: ToolsConfig) -> None:
        """The server's curation (allow/deny/rename/description), applied from now on."""
        if self._rules.get(alias) == rules:
            return
        self._rules[alias] = rules
        old = self._servers.get(alias)
        if old is not None:
            self._install(alias, old.raw, old.trusted)

    def rejudge(self, alias: str) -> bool:
        """The server's tools through the gate again (its pins or settings changed);
        whether what agents see of them changed."""
        old = self._servers.get(alias)
        if old is None:
            return False
        rules = self._rules.get(alias)
        judged = self.gate.tools(alias, old.raw, rules.rename if rules else None)
        if judged.same_as(old.judged):
            return False
        self._install(alias, old.raw, old.trusted)
        return True

    def _install(self, alias: str, raw: dict[str, mcp.Tool], trusted: bool) -> None:
        old = self._servers.get(alias)
        server = _Server(raw, trusted, self._rules.get(alias), self.gate, alias)
        if old is not None:
            server.set_state(old.available, old.marker)
        self._servers[alias] = server
        self._reclaim(alias, set(old.tools) if old else set(), set(server.tools))

    def remove(self, alias: str) -> bool:
        self.gate.review.forget(alias)
        old = self._servers.pop(alias, None)
        if old is None:
            return False
        self._reclaim(alias, set(old.tools), set())
        return True

    def rename(self, naming: NamingConfig) -> None:
        """A new template or length: every local name is derived again."""
        servers = self._servers
        self.naming = naming
        self._servers, self._by_local, self._by_key, self._claims = {}, {}, {}, {}
        for alias, server in servers.items():
            self._servers[alias] = server
            self._reclaim(alias, set(), set(server.tools))

    def set_availability(self, alias: str, available: bool, marker: str | None = None) -> bool:
        server = self._servers.get(alias)
        if server is None or (server.available, server.marker) == (available, marker):
            return False
        server.set_state(available, marker)
        by_key, flags = self._by_key, server.flags
        for name in server.tools:
            entry = by_key[(alias, name)]
            if entry.held is None:  # a held tool is unavailable, and says why, up or down
                entry.available = available
                entry.reflag(flags)
        self._changed()
        return True

    def _reclaim(self, alias: str, old: set[str], new: set[str]) -> None:
        template = self.naming.template
        touched: set[str] = set()
        for name in old:
            cand = candidate_name(template, alias, name)
            claims = self._claims.get(cand)
            if claims is not None:
                rest = tuple(k for k in claims if k != (alias, name))
                if rest:
                    self._claims[cand] = rest
                else:
                    del self._claims[cand]
            touched.add(cand)
            entry = self._by_key.pop((alias, name), None)
            if entry is not None and self._by_local.get(entry.local) is entry:
                del self._by_local[entry.local]
                touched.add(entry.local)  # a hashed name it held: its plain claimant's again
        if new and not old:
            # A server's first list, or all of it after a rename: most names want a
            # name nobody has, and take it here without the sorted pass below (that
            # pass was half of installing 10,000 tools at start-up).
            new = self._place_free(alias, new)
        for name in new:
            cand = candidate_name(template, alias, name)
            claimants = self._claims.get(cand, ())
            if (alias, name) not in claimants:
                self._claims[cand] = (*claimants, (alias, name))
            touched.add(cand)
        for cand in sorted(touched):  # set order differs per process; names must not
            for key in sorted(self._claims.get(cand, ())):
                self._place(cand, key)
        self._changed()

    def _place_free(self, alias: str, names: set[str]) -> set[str]:
        """Place the tools whose candidate is unclaimed, short enough and no other
        tool's name, as ``_place`` would; returns the rest. A later tool of the same
        candidate adds its claim to one placed here, and the pass over touched names
        gives both their hashed names, as if neither had been placed first."""
        template, max_len = self.naming.template, self.naming.max_length
        claims, by_key, by_local = self._claims, self._by_key, self._by_local
        server = self._servers[alias]
        rest: set[str] = set()
        for name in names:
            cand = candidate_name(template, alias, name)
            if cand in claims or cand in by_local or len(cand) > max_len:
                rest.add(name)
                continue
            key = (alias, name)
            claims[cand] = (key,)
            entry = server.entry(cand, alias, name)
            by_key[key] = entry
            by_local[cand] = entry
        return rest

    def _place(self, cand: str, key: tuple[str, str]) -> None:
        alias, name = key
        max_len = self.naming.max_length
        local = cand
        if len(self._claims[cand]) > 1 or len(cand) > max_len or self._taken(cand, key):
            digits, most = 6, most_digits(max_len)
            local = hashed_name(cand, alias, name, max_len, digits)
            while digits < most and self._taken(local, key):
                digits += 2
                local = hashed_name(cand, alias, name, max_len, digits)
        by_local = self._by_local
        previous = self._by_key.get(key)
        displaced = by_local.get(local)
        freed: str | None = None
        if (
            previous is not None
            and previous.local != local
            and by_local.get(previous.local) is previous
        ):
            del by_local[previous.local]
            freed = previous.local
        entry = self._servers[alias].entry(local, alias, name)
        self._by_key[key] = entry
        if displaced is None or displaced is previous:
            by_local[local] = entry
        elif not self._is_hashed(displaced):
            by_local[local] = entry
            # This tool's hashed name was another tool's plain name: that one is hashed.
            moved = (displaced.alias, displaced.name)
            self._place(candidate_name(self.naming.template, *moved), moved)
        # Else two digests agree in every digit: the holder keeps the name.
        if freed is not None:
            # The hashed name this tool let go of may be another tool's plain name again.
            for other in sorted(self._claims.get(freed, ())):
                self._place(freed, other)

    def _taken(self, local: str, key: tuple[str, str]) -> bool:
        # Another tool holds it as a hashed name. A plain name does not count: a hashed
        # name outranks it, wherever the two come from and whichever came first.
        holder = self._by_local.get(local)
        return (
            holder is not None and holder is not self._by_key.get(key) and self._is_hashed(holder)
        )

    def _is_hashed(self, entry: Entry) -> bool:
        return (entry.alias, entry.name) not in self._claims.get(entry.local, ())

    def _changed(self) -> None:
        self._listing = None
        self.version += 1

    # -- queries --

    def lookup(self, local: str) -> Entry | None:
        return self._by_local.get(local)

    def entries(self) -> list[Entry]:
        """Deterministic order: alias, then the server's own tool name."""
        out: list[Entry] = []
        for alias in sorted(self._servers):
            out.extend(self._by_key[(alias, n)] for n in sorted(self._servers[alias].tools))
        return out

    def size(self) -> int:
        """How many tools agents are listed (without building the listing)."""
        return len(self._by_key)

    def listing(self) -> list[Entry]:
        """The entries agents are listed, in order (each encodes as its ``wire()``)."""
        if self._listing is None:
            self._listing = self.entries()
        return self._listing

    def raw_tools(self, alias: str) -> list[mcp.Tool] | None:
        """The server's last list as it sent it (before curation); None if never listed."""
        server = self._servers.get(alias)
        return list(server.raw.values()) if server else None

    def server_flags(self, alias: str) -> tuple[bool, str | None]:
        """Whether the server is trusted, and its outage marker (None while it is up)."""
        server = self._servers.get(alias)
        return (server.trusted, server.marker) if server else (False, None)

    def aliases(self) -> Iterable[str]:
        return self._servers.keys()

    def count(self, alias: str) -> int:
        server = self._servers.get(alias)
        return len(server.tools) if server else 0

    def closest(self, name: str, n: int = 3) -> list[str]:
        # A ratio of 0.5 needs the name within 3x the length of a local name, and difflib
        # indexes every character of it: a huge name from an agent would cost memory
        # and time in proportion to its length, for a match that cannot exist.
        if len(name) > 3 * self.naming.max_length:
            return []
        return difflib.get_close_matches(name, list(self._by_local), n=n, cutoff=0.5)


def _same_tools(a: dict[str, mcp.Tool], b: dict[str, mcp.Tool]) -> bool:
    return a.keys() == b.keys() and all(_encode(a[k]) == _encode(b[k]) for k in a)
