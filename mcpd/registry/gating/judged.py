"""What the gate keeps of each list of each server: each item as it was made fit to
list, with its digest and findings; what of it is held and why; what the journal was
told of it. Kept while the server lists the same item (the very object, or one that
encodes the same), so that listing it again, or judging it again after an approval,
costs a lookup."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Final, Generic, Literal, NamedTuple, TypeVar

import msgspec
from msgspec import Raw

from protocol.mcp import core as mcp
from protocol.mcp import features

from ...policy.redaction.guard import SecretGuard
from ..findings.readable import Readable, read_instructions, read_listed, read_prompt, read_tool
from ..findings.rules import Finding
from ..pinning.definitions import (
    KINDS,
    Instructions,
    Kind,
    PinnedItem,
    PinRecord,
    definition,
    item_of,
    pin_digest,
)

# "forgotten": new under a name whose pin the server had mcpd forget (``forgotten``).
WhyHeld = Literal["changed", "forgotten", "new", "new_server", "finding"]
# What can wait for approval: a pinned item, or a resource of a server held whole.
HeldKind = Literal[Kind, "resource"]
HELD_KINDS: Final[tuple[HeldKind, ...]] = (*KINDS, "resource")
T = TypeVar("T", mcp.Tool, features.Prompt, features.ResourceTemplate, Instructions)
V = TypeVar("V")
S = TypeVar("S", bound=msgspec.Struct)
_encode: Final = msgspec.json.Encoder().encode
_canonical: Final = msgspec.json.Encoder(order="sorted")


class Verdicts(msgspec.Struct, Generic[V]):
    """What agents are shown of one list of a server."""

    shown: dict[str, V]  # by the server's name (a template's URI template, a URI)
    held: dict[str, str]  # the held ones: why, in words a model can act on

    def same_as(self, other: Verdicts[V]) -> bool:
        """Whether agents would be shown the very same items (judging the same list
        again gives the same objects for what did not change)."""
        return (
            self.held == other.held
            and self.shown.keys() == other.shown.keys()
            and all(item is other.shown[name] for name, item in self.shown.items())
        )


class Approval(msgspec.Struct):
    approved: list[str]  # "kind name"
    stale: list[str]  # changed again since it was shown: still held
    unknown: list[str]  # not waiting for approval
    # Resources of a server held whole, named: released only with the server.
    whole_only: list[str] = msgspec.field(default_factory=list)


class HeldOffer(msgspec.Struct):
    """A held item: what the server offers now, and what was approved before (when
    it changed, and its definition could be read)."""

    server: str
    kind: HeldKind
    name: str
    why: WhyHeld
    offered: PinRecord
    approved: PinRecord | None = None
    rules: list[str] = msgspec.field(default_factory=list)  # found in what is offered
    findings: tuple[Finding, ...] = ()  # what they found there, and where


def held_label(kind: HeldKind, name: str) -> str:
    """How a pinned item is named to people: a server's instructions by their kind."""
    return f"{kind} {name}" if name else kind


def held_reason(why: WhyHeld, alias: str, rules: Iterable[str] = ()) -> str:
    how = f"run `mcpd approve {alias}`"
    if why == "changed":
        return f"its definition changed since it was approved; {how}"
    if why == "forgotten":
        forgot = f"its name is among those whose pins {alias} had mcpd forget"
        return f"{forgot}, or matches one by chance; {how}"
    if why == "new":
        return f"it is new since {alias} was approved; {how}"
    if why == "new_server":
        return f"{alias} is new to mcpd and not approved yet; {how}"
    return f"its text reads as orders to the model ({', '.join(rules)}); {how} once it is read"


class Masker(NamedTuple):
    """One server's items masked as made fit to list. The server's own were searched as
    they came, but cleaning takes out what may split a secret, which is whole only in
    what cleaning made: so that is searched, whenever cleaning changed anything."""

    masking: SecretGuard
    alias: str

    def fit(self, kind: str, given: object, made: S) -> S:
        """``made`` (what cleaning made of ``given``) with every secret in it masked."""
        if made is given:
            return made
        raw = Raw(_encode(made))
        what = "its instructions" if kind == "instructions" else f"a listed {kind}"
        masked = self.masking.reread(self.alias, raw, what)
        return made if masked is raw else msgspec.json.decode(masked, type=type(made))


class ItemJudged(msgspec.Struct, gc=False):
    """What the gate made of one item: kept while the server lists that item, so
    listing it again (or judging again after an approval) costs a lookup. (Nothing
    it holds refers back to it: it needs no place among what the collector tracks.)"""

    source: object  # as the server listed it
    item: object  # as it may be listed: cleaned (``source`` itself when it was clean)
    digest: bytes | None  # of its definition; None for what is not pinned
    findings: tuple[Finding, ...]


class HeldView(msgspec.Struct, gc=False):
    """What agents are shown of a held item, made from the definition approved."""

    approved: bytes  # the approved digest it was made for (b"": none)
    item: PinnedItem | features.Resource  # as approved, or its name (a resource's URI) alone
    definition: PinRecord | None  # the approved definition, when it could be read


class ListState:
    """What the gate keeps of one list of one server (its tools, say)."""

    __slots__ = ("findings", "memo", "pending", "told", "views")

    def __init__(self) -> None:
        self.memo: dict[str, ItemJudged] = {}
        self.pending: dict[str, HeldOffer] = {}
        self.findings: dict[str, tuple[Finding, ...]] = {}
        # What the journal was last told of each item, by (name, what happened): the
        # definition's digest (or, for what is not pinned, which ItemJudged).
        self.told: dict[tuple[str, str], object] = {}
        # What agents are shown of each held item: the same object while the approved
        # definition is the same.
        self.views: dict[str, HeldView] = {}

    def keep_only(self, names: set[str]) -> None:
        """Forget what the server no longer lists (its pins stay)."""
        for store in (self.memo, self.pending, self.findings, self.views):
            for name in [n for n in store if n not in names]:
                del store[name]
        for key in [k for k in self.told if k[0] not in names]:
            del self.told[key]

    def seen(
        self,
        name: str,
        item: PinnedItem | features.Resource,
        kind: str,
        mask: Masker | None = None,
    ) -> ItemJudged:
        seen = self.memo.get(name)
        if seen is not None:
            if seen.source is item:
                return seen
            if seen.source == item and _encode(seen.source) == _encode(item):
                # Listed again, the same: what was made of it stands, and the new
                # object (the one the tables keep) takes the old one's place. (Equal
                # is not enough: to Python, 1, 1.0 and true in annotations are.)
                if seen.item is seen.source:
                    seen.item = item
                seen.source = item
                return seen
        read: Readable[PinnedItem | features.Resource]
        if isinstance(item, features.Resource):
            read = read_listed(item)
            digest, findings = None, tuple(read.findings(rules=False))
        else:
            read = READERS[kind](item)  # type: ignore[index]
            data = definition(item)
            digest, findings = hashlib.sha256(data).digest(), tuple(read.findings(definition=data))
        made = read.item if mask is None else mask.fit(kind, item, read.item)
        seen = ItemJudged(item, made, digest, findings)
        self.memo[name] = seen
        return seen

    def view(self, name: str, approved: bytes) -> HeldView | None:
        """What agents are shown of a held item, if it was made for that approved
        digest (b"": none)."""
        view = self.views.get(name)
        return view if view is not None and view.approved == approved else None

    def hold_resource(self, alias: str, resource: features.Resource) -> features.Resource:
        """A resource held with its server: what agents are shown of it (its URI
        alone), and the resource as the server offers it now kept waiting."""
        uri = resource.uri
        view = self.view(uri, b"")
        if view is None:
            view = self.views[uri] = HeldView(b"", features.Resource(uri=uri, name=uri), None)
        offered = resource_record(resource)
        old = self.pending.get(uri)
        if old is None or old.offered.digest != offered.digest:
            self.pending[uri] = HeldOffer(alias, "resource", uri, "new_server", offered)
        assert isinstance(view.item, features.Resource)
        return view.item

    def tell(self, name: str, what: str, key: object) -> bool:
        """Whether the journal has yet to hear ``what`` of this definition (``key``)."""
        if self.told.get((name, what)) == key:
            return False
        self.told[(name, what)] = key
        return True


READERS: Final[dict[Kind, Callable[[PinnedItem], Readable[PinnedItem]]]] = {
    "tool": read_tool,  # type: ignore[dict-item]
    "prompt": read_prompt,  # type: ignore[dict-item]
    "template": read_listed,  # type: ignore[dict-item]
    "instructions": read_instructions,  # type: ignore[dict-item]
}


def resource_record(resource: features.Resource) -> PinRecord:
    """A resource as the person asked to release it reads it (it is not pinned)."""
    data = _canonical.encode(resource)
    return PinRecord(pin_digest(data), Raw(data))


def held_view(
    kind: Kind, name: str, approved: PinRecord | None, mask: Masker | None = None
) -> PinnedItem:
    """What agents are shown of a held item: as approved, else its name alone (of
    instructions: none, no text); by the server's name for it now (``name``), which
    is what a call to it would reach, even when it was approved under another."""
    if approved is not None:
        try:
            given = item_of(kind, approved.definition)
            shown: PinnedItem = READERS[kind](given).item
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass
        else:
            if mask is not None:
                shown = mask.fit(kind, given, shown)
            if isinstance(shown, features.ResourceTemplate) and shown.uriTemplate != name:
                shown = msgspec.structs.replace(shown, uriTemplate=name)
            elif isinstance(shown, mcp.Tool | features.Prompt) and shown.name != name:
                shown = msgspec.structs.replace(shown, name=name)
            return shown
    if kind == "tool":
        return mcp.Tool(name=name)
    if kind == "prompt":
        return features.Prompt(name=name)
    if kind == "instructions":
        return Instructions("")
    return features.ResourceTemplate(uriTemplate=name, name=name)
