"""The aggregated prompt table: local names <-> (alias, the server's prompt name).

Prompts are named like tools (``registry.naming.names``) and curated like tools
(``[servers.NAME.prompts]`` allow, deny, rename, description). A down server's prompts
stay listed, marked unavailable the same way its tools are. What agents see is
encoded once per change; a view (a profile) filters it by ``(alias, name)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import msgspec
from msgspec import Raw

from protocol.mcp import features

from ...config.tables.model import NamingConfig
from ...config.tables.servertable import ToolsConfig
from ..gating.gate import ListGate
from ..gating.limits import first_listed
from ..naming.names import assign
from ..text.marking import breaks_as_spaces
from .curation import curated_names, lets_through
from .shown import argument_text, described, marked_title, sourced

_encode: Final = msgspec.json.Encoder().encode

Filter = Callable[[str, str], bool]  # (alias, the name before the template)


class PromptEntry:
    """One prompt as agents see it, with the way back to its server."""

    __slots__ = ("alias", "available", "encoded", "held", "local", "name", "original", "prompt")

    def __init__(
        self, local: str, alias: str, name: str, original: str, prompt: features.Prompt
    ) -> None:
        self.local = local
        self.alias = alias
        self.name = name  # after the server's curation, before the template
        self.original = original
        self.prompt = prompt
        self.available = True
        self.held: str | None = None  # why it is held (``gate``); None: it is not
        self.encoded = Raw(b"")

    def reencode(self, available: bool, marker: str | None) -> None:
        """As agents see it now; a held prompt stays unavailable, saying why."""
        if self.held is not None:
            available, marker = False, f"held: {self.held}"
        self.available = available
        self.encoded = Raw(_encode(agent_prompt(self, marker)))


class _Server:
    __slots__ = ("available", "held", "judged", "marker", "originals", "raw", "shown")

    def __init__(
        self, raw: dict[str, features.Prompt], rules: ToolsConfig | None, gate: ListGate, alias: str
    ) -> None:
        self.raw = raw
        self.judged = judged = gate.prompts(alias, raw, rules.rename if rules else None)
        self.held = judged.held  # by the server's own name
        self.shown, self.originals = _curate(judged.shown, rules, alias)
        self.available = True
        self.marker: str | None = None


class PromptTable:
    def __init__(self, naming: NamingConfig, gate: ListGate | None = None) -> None:
        self.naming = naming
        self.gate = gate if gate is not None else ListGate()
        self._servers: dict[str, _Server] = {}
        self._rules: dict[str, ToolsConfig] = {}
        self._by_local: dict[str, PromptEntry] = {}
        self._entries: list[PromptEntry] = []
        self.version = 0

    # -- changes --

    def update(self, alias: str, prompts: Sequence[features.Prompt]) -> bool:
        """Replace one server's prompts; whether anything agents see changed."""
        new = {p.name: p for p in first_listed(prompts, lambda p: p.name)}
        old = self._servers.get(alias)
        if old is not None and _encode(list(old.raw.values())) == _encode(list(new.values())):
            return False
        self._install(alias, new)
        return True

    def rejudge(self, alias: str) -> bool:
        """The server's prompts through the gate again (pins or settings changed);
        whether what agents see of them changed."""
        old = self._servers.get(alias)
        if old is None:
            return False
        rules = self._rules.get(alias)
        judged = self.gate.prompts(alias, old.raw, rules.rename if rules else None)
        if judged.same_as(old.judged):
            return False
        self._install(alias, old.raw)
        return True

    def _install(self, alias: str, raw: dict[str, features.Prompt]) -> None:
        old = self._servers.get(alias)
        server = _Server(raw, self._rules.get(alias), self.gate, alias)
        if old is not None:
            server.available, server.marker = old.available, old.marker
        self._servers[alias] = server
        self._rebuild()

    def set_rules(self, alias: str, rules: ToolsConfig) -> None:
        if self._rules.get(alias) == rules:
            return
        self._rules[alias] = rules
        if alias in self._servers:
            self._install(alias, self._servers[alias].raw)

    def remove(self, alias: str) -> bool:
        if self._servers.pop(alias, None) is None:
            return False
        self._rebuild()
        return True

    def withdraw(self, alias: str) -> bool:
        """The server no longer offers prompts: none of its prompts is listed, waits
        for approval or can be got; whether the table had it."""
        if alias not in self._servers:
            return False
        self.gate.withdrawn(alias, "prompt")
        return self.remove(alias)

    def rename(self, naming: NamingConfig) -> None:
        self.naming = naming
        self._rebuild()

    def set_availability(self, alias: str, available: bool, marker: str | None = None) -> bool:
        server = self._servers.get(alias)
        if server is None or (server.available, server.marker) == (available, marker):
            return False
        server.available, server.marker = available, marker
        for entry in self._entries:
            if entry.alias == alias:
                entry.reencode(available, marker)
        self.version += 1
        return True

    def _rebuild(self) -> None:
        keys = [(alias, name) for alias, s in self._servers.items() for name in s.shown]
        names = assign(self.naming, keys)
        entries = []
        for (alias, name), local in sorted(names.items()):
            server = self._servers[alias]
            original = server.originals.get(name, name)
            entry = PromptEntry(local, alias, name, original, server.shown[name])
            entry.held = server.held.get(original) if server.held else None
            entry.reencode(server.available, server.marker)
            entries.append(entry)
        self._entries = entries
        self._by_local = {e.local: e for e in entries}
        self.version += 1

    # -- queries --

    def lookup(self, local: str) -> PromptEntry | None:
        return self._by_local.get(local)

    def entries(self) -> list[PromptEntry]:
        """Deterministic order: alias, then the name agents see."""
        return list(self._entries)

    def listing(self, keep: Filter | None = None) -> list[Raw]:
        return [e.encoded for e in self._entries if keep is None or keep(e.alias, e.name)]

    def count(self, alias: str) -> int:
        server = self._servers.get(alias)
        return len(server.shown) if server else 0

    def known(self, alias: str) -> bool:
        return alias in self._servers

    def raw(self, alias: str) -> list[features.Prompt] | None:
        """The server's prompts as it listed them; None if it never did."""
        server = self._servers.get(alias)
        return list(server.raw.values()) if server is not None else None


def _curate(
    raw: dict[str, features.Prompt], rules: ToolsConfig | None, alias: str
) -> tuple[dict[str, features.Prompt], dict[str, str]]:
    """What agents see of a server's prompts (by name before the template), and the
    server's own name for each renamed one."""
    if rules is None or rules == ToolsConfig():
        return dict(raw), {}
    shown = [n for n in raw if lets_through(n, rules)]
    names = curated_names(shown, rules.rename, alias, "prompt")
    out: dict[str, features.Prompt] = {}
    originals: dict[str, str] = {}
    for name in shown:
        new = names.get(name)
        if new is None:
            continue
        prompt = raw[name]
        if name in rules.description:
            prompt = msgspec.structs.replace(prompt, description=rules.description[name])
        out[new] = prompt
        if new != name:
            originals[new] = name
    return out, originals


def agent_prompt(entry: PromptEntry, marker: str | None) -> features.Prompt:
    """The prompt as agents see it: local name, its source noted, its state marked."""
    p = entry.prompt
    alias = entry.alias
    note, meta = sourced(
        alias, entry.original, entry.available, described(alias, p.description), p.meta, marker
    )
    if entry.held is not None:
        meta["mcpd/held"] = entry.held
    title = marked_title(alias, p.title)
    arguments = p.arguments
    if isinstance(arguments, list):
        arguments = [_agent_argument(alias, arg) for arg in arguments]
    return msgspec.structs.replace(
        p, name=entry.local, title=title, description=note, arguments=arguments, meta=meta
    )


def _agent_argument(alias: str, arg: features.PromptArgument) -> features.PromptArgument:
    """An argument as agents see it: no line of its texts reads as another's, and its
    title is one line."""
    title = breaks_as_spaces(arg.title) if isinstance(arg.title, str) else arg.title
    title, description = argument_text(alias, title), argument_text(alias, arg.description)
    if title is arg.title and description is arg.description:
        return arg
    return msgspec.structs.replace(arg, title=title, description=description)
