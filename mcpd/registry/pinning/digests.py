"""What the daemon keeps in memory of its pins: each item's digest, 32 bytes.

Judging a list needs no more: an item is as approved when its digest is the pinned
one. The definitions are in the pin file (``local.pins.pinfile``), read back for the few
that a held item or a command needs. In memory, a definition is only what it is made
from between the moment it is pinned and the next write of the file (``Unwritten``:
the item as the server listed it, which the tables keep anyway, or the definition a
person approved), and what a held item is shown as and offers (``judged``).

The pin file keeps the definitions of what the servers list now; of an item a server
no longer lists, only its digest (``ServerPins.bare``), and of those only so many
(``ServerPins.unlist``): a server that lists new items every time cannot make the
file, and each write of it, grow with everything it ever listed. A pin forgotten so
leaves marks of what agents know its item by (``forgotten``): the item listed again,
however respelled, is no new item.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Container, Iterator, Mapping
from typing import Final, NamedTuple, TypeAlias

from msgspec import Raw

from .definitions import (
    BARE,
    FORMAT,
    KINDS,
    BadPins,
    Kind,
    PinnedItem,
    PinnedServer,
    PinRecord,
    PinSet,
    bare,
    definition,
    has_later_fields,
)
from .forgotten import Forgotten

_PREFIX: Final = "sha256:"


class Pin(NamedTuple):
    """What is known in memory of one pinned item, as it is shown."""

    digest: str  # "sha256:" and the hex digest
    reviewed: bool


class ServerPins:
    """One server's pins as the daemon keeps them: each item's SHA-256 (32 bytes, by
    the server's name for it), which of them a person approved, and which the pin file
    keeps by their digest alone."""

    __slots__ = ("approved", "bare", "digests", "forgotten", "former", "reviewed")

    def __init__(self, approved: bool = False) -> None:
        self.approved = approved
        self.digests: dict[Kind, dict[str, bytes]] = {kind: {} for kind in KINDS}
        self.reviewed: set[tuple[Kind, str]] = set()
        # Pins read from a pin set of format 1 and not pinned again since (``definitions``).
        self.former: set[tuple[Kind, str]] = set()
        # Pins of items the server no longer lists, kept without their definitions.
        self.bare: set[tuple[Kind, str]] = set()
        # The marks of the pins ``unlist`` forgot (``facing.marks``).
        self.forgotten: dict[Kind, Forgotten] = {}

    def repinned(self, kind: Kind, name: str, reviewed: bool) -> None:
        """The item is pinned anew (its digest set by the caller, its definition
        given to ``Unwritten``)."""
        self.former.discard((kind, name))
        self.bare.discard((kind, name))
        if reviewed:
            self.reviewed.add((kind, name))
        else:
            self.reviewed.discard((kind, name))

    def unlist(
        self,
        kind: Kind,
        listed: Container[str],
        most: int,
        chars: int,
        marks_of: Callable[[str], list[str]],
    ) -> list[str]:
        """Keep the pins of items not in ``listed`` by their digest alone, the ``most``
        pinned first, and of those the shortest names up to ``chars`` characters in
        all; forget the others, each leaving its marks in ``forgotten`` (``marks_of``
        its name: ``facing.marks``), so that it never comes back as a new item.
        Returns the names of the pins this changed."""
        unlisted = [name for name in self.of(kind) if name not in listed]
        kept = unlisted[:most]
        gone = set(unlisted[most:])
        used = sum(map(len, kept))
        # The longest go first (of names alike, the one pinned last): a name costs
        # its length, and a real one is short.
        for name in sorted(reversed(kept), key=len, reverse=True):
            if used <= chars:
                break
            gone.add(name)
            used -= len(name)
        if gone:
            marks = self.forgotten.get(kind)
            if marks is None:
                marks = self.forgotten[kind] = Forgotten()
            for name in gone:
                del self.of(kind)[name]
                self.repinned(kind, name, False)
                for mark in marks_of(name):
                    marks.add(mark)
        bared = [n for n in unlisted if n not in gone and (kind, n) not in self.bare]
        self.bare.update((kind, name) for name in bared)
        return bared + [n for n in unlisted if n in gone]

    def forgot(self, kind: Kind, looked_up: list[str]) -> bool:
        """Whether a pin that left one of the marks ``looked_up`` may have been
        forgotten (``unlist``)."""
        marks = self.forgotten.get(kind)
        return marks is not None and any(mark in marks for mark in looked_up)

    def forgotten_names(self) -> int:
        """About how many names of all its lists the server had mcpd forget, a
        template counted by its marks (``facing.marks``)."""
        return sum(marks.marked() for marks in self.forgotten.values())

    def of(self, kind: Kind) -> dict[str, bytes]:
        return self.digests[kind]

    def copy(self) -> ServerPins:
        out = ServerPins(self.approved)
        out.digests = {kind: dict(digests) for kind, digests in self.digests.items()}
        out.reviewed = set(self.reviewed)
        out.former = set(self.former)
        out.bare = set(self.bare)
        out.forgotten = {kind: marks.copy() for kind, marks in self.forgotten.items()}
        return out

    def shown(self, kind: Kind) -> Mapping[str, Pin]:
        return _Shown(self, kind)

    @property
    def tools(self) -> Mapping[str, Pin]:
        return self.shown("tool")

    @property
    def prompts(self) -> Mapping[str, Pin]:
        return self.shown("prompt")

    @property
    def templates(self) -> Mapping[str, Pin]:
        return self.shown("template")


class _Shown(Mapping[str, Pin]):
    """One kind of a server's pins, each as a ``Pin``."""

    __slots__ = ("_kind", "_server")

    def __init__(self, server: ServerPins, kind: Kind) -> None:
        self._server = server
        self._kind = kind

    def __getitem__(self, name: str) -> Pin:
        found = self._server.of(self._kind)[name]
        return Pin(shown_digest(found), (self._kind, name) in self._server.reviewed)

    def __iter__(self) -> Iterator[str]:
        return iter(self._server.of(self._kind))

    def __len__(self) -> int:
        return len(self._server.of(self._kind))


class Pins:
    """Every server's pins, as the daemon keeps them (by alias)."""

    __slots__ = ("servers",)

    def __init__(self) -> None:
        self.servers: dict[str, ServerPins] = {}


ItemOrDefinition: TypeAlias = "PinnedItem | Raw"  # an item as a server listed it, or its definition
Wanted = tuple[str, Kind, str, bytes]  # (alias, kind, name, digest) of a definition
FoundDefinitions = dict[tuple[str, Kind, str], Raw]  # definitions, by (alias, kind, name)


class Unwritten:
    """What changed in the pins since the pin file was last written: the servers whose
    pins did (each of them is written anew, the others copied as they are), and for
    each item pinned, what its definition is made from (the item as the server listed
    it, or the definition a person approved). Only these are kept in memory until
    they are written."""

    __slots__ = ("lists", "servers")

    def __init__(self) -> None:
        self.servers: set[str] = set()
        self.lists: dict[tuple[str, Kind], dict[str, ItemOrDefinition]] = {}

    def changed(self, alias: str) -> None:
        """The server's pins changed (an item dropped, the server approved)."""
        self.servers.add(alias)

    def put(self, alias: str, kind: Kind, name: str, source: ItemOrDefinition) -> None:
        self.servers.add(alias)
        found = self.lists.get((alias, kind))
        if found is None:
            found = self.lists[(alias, kind)] = {}
        found[name] = source

    def get(self, alias: str, kind: Kind, name: str) -> ItemOrDefinition | None:
        found = self.lists.get((alias, kind))
        return None if found is None else found.get(name)

    def drop(self, alias: str, kind: Kind, names: list[str]) -> None:
        self.servers.add(alias)
        found = self.lists.get((alias, kind))
        for name in names if found is not None else ():
            found.pop(name, None)  # type: ignore[union-attr]

    def take(self) -> Unwritten:
        """All of it, to write; none is left here."""
        out = Unwritten()
        out.servers, self.servers = self.servers, set()
        out.lists, self.lists = self.lists, {}
        return out

    def give_back(self, taken: Unwritten) -> None:
        """What could not be written, unless it was pinned again since."""
        self.servers |= taken.servers
        for key, items in taken.lists.items():
            mine = self.lists.setdefault(key, {})
            for name, source in items.items():
                mine.setdefault(name, source)


def pinned_definitions(
    pins: Pins,
    unwritten: Unwritten,
    stored: Callable[[list[Wanted]], FoundDefinitions],
    wanted: list[Wanted],
) -> FoundDefinitions:
    """The definitions of these pins: those not written yet from ``unwritten``, the
    others from the pin file (``stored``); any kept by its digest alone, not found, or
    not matching its digest, is left out."""
    out: FoundDefinitions = {}
    rest: list[Wanted] = []
    for alias, kind, name, digest in wanted:
        server = pins.servers.get(alias)
        if server is not None and (kind, name) in server.bare:
            continue
        source = unwritten.get(alias, kind, name)
        data = None if source is None else definition_of(source, digest)
        if data is None:
            rest.append((alias, kind, name, digest))
        else:
            out[(alias, kind, name)] = Raw(data)
    if rest:
        out.update(stored(rest))
    return out


def definition_of(source: ItemOrDefinition, expected: bytes) -> bytes | None:
    """The definition ``source`` stands for, if it is the one of that digest."""
    data = bytes(source) if isinstance(source, Raw) else definition(source)
    return data if hashlib.sha256(data).digest() == expected else None


def former_match(server: ServerPins, kind: Kind, name: str, source: PinnedItem, pin: bytes) -> bool:
    """Whether ``pin`` is of format 1 and stands for ``source``: equal in all that
    format pinned."""
    if (kind, name) not in server.former:
        return False
    if not has_later_fields(source):
        return False  # the same definition in either format: it changed
    return hashlib.sha256(definition(source, former=True)).digest() == pin


def adopt_pins(
    alias: str,
    kind: Kind,
    server: ServerPins,
    records: Mapping[str, PinRecord],
    out: Unwritten,
    former: bool = False,
) -> int:
    """Pin records of a checked pin set as they are (``out`` gets their definitions to
    write); how many. ``former``: the set is of format 1."""
    pinned = server.of(kind)
    for name, record in records.items():
        digest = parsed_digest(record.digest)
        assert digest is not None  # checked
        pinned[name] = digest
        server.repinned(kind, name, record.reviewed)
        if former:
            server.former.add((kind, name))
        if bare(record):
            server.bare.add((kind, name))
        else:
            out.put(alias, kind, name, record.definition)
    return len(records)


def imported(pins: Pins, incoming: PinSet, out: Unwritten, replace: bool) -> int:
    """A checked pin set taken as approved (``replace``: each server in it keeps no
    pin of its own besides); how many items it pins."""
    count = 0
    for alias, theirs in incoming.servers.items():
        server = pins.servers.get(alias)
        if server is None or replace:
            server = pins.servers[alias] = ServerPins()
        server.approved = server.approved or theirs.approved
        out.changed(alias)
        former = incoming.format != FORMAT
        for kind in KINDS:
            count += adopt_pins(alias, kind, server, theirs.of(kind), out, former)
    return count


def every_pin(servers: Mapping[str, ServerPins]) -> list[Wanted]:
    """Every pin of these servers kept with its definition, as definitions to find."""
    return [
        (alias, kind, name, digest)
        for alias, server in servers.items()
        for kind in KINDS
        for name, digest in server.of(kind).items()
        if (kind, name) not in server.bare
    ]


def pin_set(servers: Mapping[str, ServerPins], found: FoundDefinitions) -> PinSet:
    """These servers' pins with their definitions; ``BadPins`` if one is not found."""
    out = PinSet()
    for alias, server in servers.items():
        pinned = out.servers[alias] = PinnedServer(approved=server.approved)
        for kind in KINDS:
            records = pinned.of(kind)
            for name, digest in server.of(kind).items():
                data = Raw(BARE) if (kind, name) in server.bare else found.get((alias, kind, name))
                if data is None:
                    raise BadPins(f"the definition of {alias} {kind} {name!r} is lost")
                reviewed = (kind, name) in server.reviewed
                records[name] = PinRecord(shown_digest(digest), data, reviewed)
    return out


def shown_digest(raw_digest: bytes) -> str:
    """A digest as pin files and people see it (``definitions.pin_digest``)."""
    return _PREFIX + raw_digest.hex()


def parsed_digest(text: str) -> bytes | None:
    """A digest as pin files write it, as the daemon keeps it (None: not one)."""
    if not text.startswith(_PREFIX) or len(text) != len(_PREFIX) + 64:
        return None
    try:
        raw = bytes.fromhex(text[len(_PREFIX) :])
    except ValueError:
        return None
    # Reading hex skips spaces: 64 characters with some of them are fewer bytes.
    return raw if len(raw) == hashlib.sha256().digest_size else None
