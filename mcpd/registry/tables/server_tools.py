"""One server's tools in the tool table (``table``): its list as the server sent it,
judged by the gate and curated by its settings, and the entries made of it.

Its entries share one pair of flags (whether the server is trusted, and its outage
marker) rather than holding a pair each, as a server may list thousands of tools; a
held tool's entry is unavailable and says why, whether the server is up or down.
"""

from __future__ import annotations

from protocol.mcp import core as mcp

from ...config.tables.servertable import ToolsConfig
from ..gating.gate import ListGate
from .curation import curate
from .shown import Entry, lined_tools


class ServerTools:
    """One server's tools as the table holds them: as it listed them, as they passed
    the gate (cleaned, held where the pins say so), as its curation leaves them, and
    whether it is up; and the entry agents see for each."""

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
        gate: ListGate,
        alias: str,
    ) -> None:
        self.raw = raw  # as the server listed them
        # Cleaned, and held where the pins say so.
        self.judged = judged = gate.tools(alias, raw, rules.rename if rules else None)
        # Why each held tool is held, by the server's own name.
        self.held = judged.held
        curated = curate(judged.shown, rules, alias)
        # What agents see, by name before the template.
        self.tools = lined_tools(alias, curated.tools)
        self.originals = curated.originals
        self.trusted = trusted
        self.available = True
        self.marker: str | None = None
        self.flags: tuple[bool, str | None] = (trusted, None)  # shared by its entries

    def set_state(self, available: bool, marker: str | None) -> None:
        self.available, self.marker = available, marker
        self.flags = (self.trusted, marker)

    def entry(self, local: str, alias: str, name: str, before_hash: str | None = None) -> Entry:
        """A new entry for the tool agents know as ``name`` (before the template);
        ``before_hash``: the name the template gave it, when ``local`` is that name
        hashed."""
        original = self.originals.get(name, name)
        others = () if before_hash is None else (before_hash,)
        entry = Entry(local, alias, original, self.tools[name], name, others)
        held = self.held.get(original) if self.held else None
        if held is None:
            entry.available = self.available
            entry.reflag(self.flags)
        else:
            entry.available = False
            entry.held = held
            entry.reflag((self.trusted, f"held: {held}"))
        return entry
