"""The operator's side of the gate: what a person approved (the pins), what waits for
their approval and what the rules found, and what ``mcpd approve``, ``mcpd pins
export|import``, ``mcpd tools --pending|--findings`` and ``mcpd status`` ask of them.

The gate (``gate``) judges every list a server sends against these pins, and keeps
what it makes of each list here (``judged.ListState``), so that an approval releases
what the gate holds and a server that leaves takes along what waits of it. The pin
file (``local.pins.pinfile``) saves the pins when ``on_pinned`` says they changed, and
reads back the definitions they no longer keep in memory (``stored``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..findings.rules import Finding
from ..gating.judged import Approval, HeldKind, HeldOffer, ListState, held_label
from .definitions import PinSet
from .digests import (
    FoundDefinitions,
    Pins,
    ServerPins,
    Unwritten,
    Wanted,
    every_pin,
    imported,
    parsed_digest,
    pin_set,
    pinned_definitions,
)

Stored = Callable[[list[Wanted]], FoundDefinitions]


class Review:
    def __init__(self, pins: Pins | None = None) -> None:
        self.pins = pins if pins is not None else Pins()
        # What was pinned and is not in the pin file yet, and what the pin file holds
        # of the definitions asked for (those it has, matching their digests).
        self.unwritten = Unwritten()
        self.stored: Stored = lambda wanted: {}
        self.on_pinned: Callable[[], None] = lambda: None  # pins changed: save them
        self.changes: dict[str, int] = {}  # definition changes seen since start, by alias
        # The pins could not be read: no server is approved by being listed, every one
        # not approved before is held whole (as hold_new_servers does) until approved.
        self.hold_unapproved = False
        # By (alias, kind): kind is also "resource" or "instructions" here.
        self._lists: dict[tuple[str, str], ListState] = {}

    def list_state(self, alias: str, kind: str) -> ListState:
        """What the gate keeps of one list of one server, made when first asked."""
        found = self._lists.get((alias, kind))
        if found is None:
            found = self._lists[(alias, kind)] = ListState()
        return found

    def definitions(self, wanted: list[Wanted]) -> FoundDefinitions:
        return pinned_definitions(self.pins, self.unwritten, self.stored, wanted)

    # -- approval --

    def approve(
        self, alias: str, picks: list[tuple[HeldKind, str, str]] | None, whole: bool = False
    ) -> Approval:
        """Pin what the server offers now for each ``(kind, name, digest)`` picked (all
        that waits, when None), if it is still what was shown (the digest). With
        ``whole`` (or no picks), and nothing of the server left waiting but resources
        picked, the server is approved as a whole, releasing them (a resource is
        never pinned: it is released with its server, or not at all)."""
        server = self.pins.servers.setdefault(alias, ServerPins())
        out = Approval([], [], [])
        whole = whole or picks is None
        wanted = None if picks is None else {(k, n): d for k, n, d in picks}
        resources: list[str] = []  # shown as they are now: released if the server is
        for pending in self.pending(alias):
            key = (pending.kind, pending.name)
            if wanted is not None and key not in wanted:
                continue
            shown = held_label(pending.kind, pending.name)
            if wanted is not None and wanted.pop(key) != pending.offered.digest:
                out.stale.append(shown)
                continue
            if pending.kind == "resource":
                if whole:
                    resources.append(pending.name)
                else:
                    out.whole_only.append(shown)
                continue
            offered = pending.offered
            digest = parsed_digest(offered.digest)
            assert digest is not None
            server.of(pending.kind)[pending.name] = digest
            server.repinned(pending.kind, pending.name, True)
            self.unwritten.put(alias, pending.kind, pending.name, offered.definition)
            del self.list_state(alias, pending.kind).pending[pending.name]
            out.approved.append(shown)
        out.unknown = [held_label(k, n) for k, n in (wanted or {})]
        if whole and len(self.pending(alias)) == len(resources):
            # Nothing waits but the resources shown: they go with the server.
            held = self.list_state(alias, "resource").pending
            for uri in resources:
                del held[uri]
                out.approved.append(held_label("resource", uri))
            server.approved = True
        self.unwritten.changed(alias)
        self.on_pinned()
        return out

    def import_pins(self, pins: PinSet, replace: bool) -> int:
        """Take a checked pin set (an export) as approved; ``replace``: each server in
        it keeps no pin of its own besides. Returns how many items it pins."""
        count = imported(self.pins, pins, self.unwritten, replace)
        self.on_pinned()
        return count

    def export(self, aliases: Iterable[str] | None = None) -> PinSet:
        """The pins of these servers (all), with their definitions; ``BadPins`` if a
        definition cannot be found (the pin file lost it)."""
        chosen = set(aliases) if aliases is not None else None
        servers = {
            a: s for a, s in sorted(self.pins.servers.items()) if chosen is None or a in chosen
        }
        return pin_set(servers, self.definitions(every_pin(servers)))

    def forget(self, alias: str) -> None:
        """The server left the configuration: nothing of it waits or is found (its
        pins stay, for when it comes back)."""
        for key in [k for k in self._lists if k[0] == alias]:
            del self._lists[key]

    # -- what waits, what was found, how many --

    def pending(self, alias: str | None = None) -> list[HeldOffer]:
        return [
            p
            for (a, _), state in sorted(self._lists.items())
            if alias is None or a == alias
            for p in state.pending.values()
        ]

    def found(self, alias: str | None = None) -> list[tuple[str, str, str, tuple[Finding, ...]]]:
        """(alias, kind, name, findings) of every item something was found in."""
        return [
            (a, kind, name, findings)
            for (a, kind), state in sorted(self._lists.items())
            if alias is None or a == alias
            for name, findings in sorted(state.findings.items())
        ]

    def counts(self, alias: str) -> dict[str, int]:
        lists = [s for (a, _), s in self._lists.items() if a == alias]
        return {
            "held": sum(len(s.pending) for s in lists),
            "definition_changes": self.changes.get(alias, 0),
            "findings": sum(len(s.findings) for s in lists),
        }
