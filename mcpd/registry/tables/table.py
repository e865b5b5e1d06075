"""The aggregated tool table: local names <-> (alias, original name), and what agents see.

Local names are spelled from the configured alias and the template (``spelling``); a
name that is too long, or that two tools would share, ends in a short hash of
``alias::tool`` instead, so it stays unique and stable across restarts.

Anyone can compute a hashed name, so the two kinds never meet: a template name shaped
like a hashed one (``_`` and six or more hex digits at its end) is hashed too, and a
server cannot take a name by listing it; nor one of mcpd's own tools' names
(``spelling.OWN_TOOLS``), hashed likewise. Hashed names that agree are all lengthened,
as plain names that clash are all hashed, so the names depend only on the set of tools
and never on which server listed first or on what is approved: a newcomer never takes
a name an approved tool had. A hashed entry keeps the name it wanted
(``Entry.other_names``): a look-alike that gets a tool's name hashed leaves a policy
rule that names the tool in force.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, TypeAlias

import msgspec

from protocol.mcp import core as mcp

from ...config.tables.model import NamingConfig
from ...config.tables.servertable import ToolsConfig
from ..gating.gate import ListGate
from ..naming.shared_names import Told
from ..naming.spelling import (
    candidate_name,
    digits_of,
    fits_as_is,
    hash_shaped,
    hashed_name,
    most_digits,
)
from .eras import Projected
from .server_tools import ServerTools
from .shown import Entry

_encode: Final = msgspec.json.Encoder().encode

# What a tools/list holds: the table's entries, and tools of mcpd's own (search mode's),
# each perhaps as one era's agents are shown it (``eras``).
ListedTool: TypeAlias = "Entry | mcp.Tool | Projected"


def listed_name(item: ListedTool) -> str:
    return item.local if isinstance(item, Entry) else item.name


class ToolTable:
    def __init__(self, naming: NamingConfig, gate: ListGate | None = None) -> None:
        self.naming = naming
        # Every list passes it: cleaned, pinned, held (a table of its own by default).
        self.gate = gate if gate is not None else ListGate()
        self._servers: dict[str, ServerTools] = {}
        self._by_local: dict[str, Entry] = {}
        self._by_key: dict[tuple[str, str], Entry] = {}
        # Who wants each candidate name: almost always one tool, so a tuple of the same
        # key objects ``_by_key`` holds, not a list and keys of its own for each tool.
        self._claims: dict[str, tuple[tuple[str, str], ...]] = {}
        # Who wants each hashed name: the tools whose hash of that many digits it is. A
        # tool whose name ends in more digits wants one of each shorter length as well.
        self._wants: dict[str, tuple[tuple[str, str], ...]] = {}
        self._listing: list[Entry] | None = None
        # Entries taken away while names are placed again: one placed as it was is kept.
        self._dropped: dict[tuple[str, str], Entry] = {}
        self._rules: dict[str, ToolsConfig] = {}
        self._told = Told()
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
        server = ServerTools(raw, trusted, self._rules.get(alias), self.gate, alias)
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
        self._servers, self._by_local, self._by_key = {}, {}, {}
        self._claims, self._wants = {}, {}
        self._told.forget()
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
        lone: list[str] = []
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
            lone.extend(self._drop((alias, name)))
        # Only once every old name is gone: a name settled here is never one of them.
        self._resettle(lone)
        if new and not old:
            # A server's first list, or all of it after a rename: most names want a
            # name nobody has, and take it here without the sorted pass below (the
            # costliest part of installing a large list at start-up).
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
        for cand in sorted(touched):
            self._told.tell(cand, self._claims.get(cand, ()), lambda k: self._by_key[k].local)
        self._dropped.clear()
        self._changed()

    def _place_free(self, alias: str, names: set[str]) -> set[str]:
        """Place the tools whose candidate is unclaimed and may be a name as it is
        (``spelling.fits_as_is``), as ``_place`` would; returns the rest. A later tool of the
        same candidate adds its claim to one placed here, and the pass over touched
        names gives both their hashed names, as if neither had been placed first."""
        template, max_len = self.naming.template, self.naming.max_length
        claims, by_key, by_local = self._claims, self._by_key, self._by_local
        server = self._servers[alias]
        rest: set[str] = set()
        for name in names:
            cand = candidate_name(template, alias, name)
            if cand in claims or not fits_as_is(cand, max_len):
                rest.add(name)
                continue
            key = (alias, name)
            claims[cand] = (key,)
            entry = server.entry(cand, alias, name)
            by_key[key] = entry
            by_local[cand] = entry
        return rest

    def _place(self, cand: str, key: tuple[str, str]) -> None:
        self._resettle(self._drop(key))
        if len(self._claims[cand]) == 1 and fits_as_is(cand, self.naming.max_length):
            # No other tool wants it, and no hashed name nor mcpd's own tool can be it.
            self._settle(key, cand)
        else:
            self._want(key)

    def _want(self, key: tuple[str, str], digits: int = 6) -> None:
        """Give the key the shortest hashed name, from ``digits`` on, that no other key's
        hash of as many digits agrees with. Keys that agree all go on to the next length,
        as plain names that clash are all hashed: who came first never decides."""
        cand = candidate_name(self.naming.template, *key)
        max_len = self.naming.max_length
        most = most_digits(max_len)
        while True:
            local = hashed_name(cand, *key, max_len, digits)
            wanted = self._wants.get(local, ())
            self._wants[local] = (*wanted, key)
            if not wanted:
                break
            if digits >= most:
                # Agreeing in every digit a name can hold: nobody reaches it by name.
                self._by_local.pop(local, None)
                break
            if len(wanted) == 1:
                self._want(wanted[0], digits + 2)  # it held the name alone until now
            digits += 2
        self._settle(key, local)

    def _drop(self, key: tuple[str, str]) -> list[str]:
        """Take the key's name away; returns the hashed names now wanted by one key."""
        entry = self._by_key.pop(key, None)
        if entry is None:
            return []
        self._dropped.setdefault(key, entry)
        if self._by_local.get(entry.local) is entry:
            del self._by_local[entry.local]
        if not hash_shaped(entry.local):
            return []
        return self._unwant(key, 6, digits_of(entry.local))

    def _unwant(self, key: tuple[str, str], low: int, high: int) -> list[str]:
        # The key no longer wants its hashed names of ``low`` to ``high`` digits.
        cand = candidate_name(self.naming.template, *key)
        lone: list[str] = []
        for digits in range(low, high + 1, 2):
            local = hashed_name(cand, *key, self.naming.max_length, digits)
            rest = tuple(k for k in self._wants[local] if k != key)
            if not rest:
                del self._wants[local]
            else:
                self._wants[local] = rest
                if len(rest) == 1:
                    lone.append(local)
        return lone

    def _resettle(self, lone: list[str]) -> None:
        """A hashed name one key alone wants now is that key's: it ends in no more
        digits than it must."""
        while lone:
            local = lone.pop()
            wanted = self._wants.get(local, ())
            if len(wanted) != 1:
                continue
            key = wanted[0]
            held = self._by_key[key]
            if held.local != local:
                lone.extend(self._unwant(key, digits_of(local) + 2, digits_of(held.local)))
            elif self._by_local.get(local) is held:
                continue
            self._settle(key, local)

    def _settle(self, key: tuple[str, str], local: str) -> None:
        alias, name = key
        previous = self._by_key.get(key)
        if previous is not None and self._by_local.get(previous.local) is previous:
            del self._by_local[previous.local]
        cand = candidate_name(self.naming.template, alias, name)
        entry = self._servers[alias].entry(local, alias, name, None if cand == local else cand)
        earlier = self._dropped.pop(key, previous)
        if earlier is not None and earlier.same_as(entry):
            entry = earlier
        self._by_key[key] = entry
        if len(self._wants.get(local, (key,))) == 1:  # a plain name has no wants
            self._by_local[local] = entry

    def _changed(self) -> None:
        self._listing = None
        self.version += 1

    # -- queries --

    def lookup(self, local: str) -> Entry | None:
        return self._by_local.get(local)

    def entries(self) -> list[Entry]:
        """Deterministic order: alias, then the server's own tool name."""
        servers = self._servers
        return [self._by_key[(a, n)] for a in sorted(servers) for n in sorted(servers[a].tools)]

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


def _same_tools(a: dict[str, mcp.Tool], b: dict[str, mcp.Tool]) -> bool:
    return a.keys() == b.keys() and all(_encode(a[k]) == _encode(b[k]) for k in a)
