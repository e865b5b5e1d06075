"""What the pin commands (``mcpd approve``, ``mcpd tools --pending``, ``mcpd pins
import|forget-unreadable``) are answered: dicts, as the socket method that passes one on
may add to it (a held item's local name), each of a shape it names."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from ...registry.gating.judged import HeldKind, WhyHeld


class HeldItem(TypedDict):
    """An item held until approved, as ``mcpd tools --pending`` lists it."""

    server: str
    kind: HeldKind
    name: str
    why: WhyHeld
    reason: str
    rules: list[str]
    digest: str
    offered: object  # its definition, decoded
    approved: object  # the definition approved before, decoded; None when none was
    # How many names its server had mcpd forget, when it is held as maybe forgotten.
    forgotten_names: NotRequired[int]
    # The name agents of the asking profile know it by.
    local: NotRequired[str]


class Approved(TypedDict):
    """What an approval did, by label ("tool search"), and whether it was written."""

    approved: list[str]
    stale: list[str]  # changed again since it was shown: still held
    unknown: list[str]  # not waiting for approval
    whole_only: list[str]  # resources of a server held whole: released with it alone
    saved: bool


class PinsImported(TypedDict):
    """What an import of pins did."""

    servers: list[str]
    items: int
    released: int  # held items the import approved
    saved: bool


class PinsForgotten(TypedDict):
    """The unreadable pin files removed, and the servers approved as they list now."""

    removed: list[str]
    approved: list[str]
