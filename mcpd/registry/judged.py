"""What the gate keeps of each list of each server: each item as it was made fit to
list, with its digest and findings; what of it is held and why; what the journal was
told of it. Kept while the server lists the very same object, so that listing it
again, or judging it again after an approval, costs a lookup."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final, Literal

import msgspec

from protocol import surface

from .pins import Item, Kind, Pin, pin_of
from .readable import Readable, read_listed, read_prompt, read_tool
from .rules import Finding

Why = Literal["changed", "new", "new_server", "finding"]


class Pending(msgspec.Struct):
    """A held item: what the server offers now, and what was approved before."""

    server: str
    kind: Kind
    name: str
    why: Why
    offered: Pin
    approved: Pin | None = None
    rules: list[str] = msgspec.field(default_factory=list)  # found in what is offered


def held_reason(why: Why, alias: str, rules: Iterable[str] = ()) -> str:
    how = f"run `mcpd approve {alias}`"
    if why == "changed":
        return f"its definition changed since it was approved; {how}"
    if why == "new":
        return f"it is new since {alias} was approved; {how}"
    if why == "new_server":
        return f"{alias} is new to mcpd and not approved yet; {how}"
    return f"its text reads as orders to the model ({', '.join(rules)}); {how} once it is read"


class Seen(msgspec.Struct, array_like=True):
    """What the gate made of one item: kept while the server lists that very object,
    so listing it again (or judging again after an approval) costs a lookup."""

    item: object  # as it may be listed: cleaned
    offered: Pin | None  # None for what is not pinned (resources, instructions)
    findings: tuple[Finding, ...]


class ListState:
    """What the gate keeps of one list of one server (its tools, say)."""

    __slots__ = ("findings", "memo", "pending", "told", "views")

    def __init__(self) -> None:
        # The item each cleaning and digest was made of (kept: identity is the key).
        self.memo: dict[str, tuple[object, Seen]] = {}
        self.pending: dict[str, Pending] = {}
        self.findings: dict[str, tuple[Finding, ...]] = {}
        # The digest of each item the journal was last told of, by (name, what happened).
        self.told: dict[tuple[str, str], str] = {}
        # What agents are shown of each held item, by the approved pin's digest ("" for
        # none): the same object while that holds.
        self.views: dict[str, tuple[str, Item]] = {}

    def keep_only(self, names: set[str]) -> None:
        """Forget what the server no longer lists (its pins stay)."""
        for store in (self.memo, self.pending, self.findings, self.views):
            for name in [n for n in store if n not in names]:
                del store[name]
        for key in [k for k in self.told if k[0] not in names]:
            del self.told[key]

    def seen(self, name: str, item: Item | surface.Resource, kind: str) -> Seen:
        memo = self.memo.get(name)
        if memo is not None and memo[0] is item:
            return memo[1]
        if isinstance(item, surface.Resource):
            read = read_listed(item)
            seen = Seen(read.item, None, tuple(read.findings(rules=False)))
        else:
            read = READERS[kind](item)  # type: ignore[index]
            seen = Seen(read.item, pin_of(item), tuple(read.findings()))
        self.memo[name] = (item, seen)
        return seen

    def tell(self, name: str, what: str, digest: str) -> bool:
        """Whether the journal has yet to hear ``what`` of this definition."""
        if self.told.get((name, what)) == digest:
            return False
        self.told[(name, what)] = digest
        return True


READERS: Final[dict[Kind, Callable[[Item], Readable]]] = {
    "tool": read_tool,  # type: ignore[dict-item]
    "prompt": read_prompt,  # type: ignore[dict-item]
    "template": read_listed,  # type: ignore[dict-item]
}
