"""What the pin commands (``mcpd approve``, ``mcpd tools --pending``, ``mcpd pins
import|forget-unreadable``) are answered: dicts, as the socket method that passes one on
may add to it (a held item's local name), each of a shape it names, which the commands
decode their answers as."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from ...registry.gating.judged import HeldKind, WhyHeld


class HeldItem(TypedDict):
    """An item held until approved, as ``mcpd tools --pending`` lists it."""

    server: str
    # Any text, as the command reads them: a newer daemon's is shown as it says it.
    kind: HeldKind | str
    name: str
    why: WhyHeld | str
    reason: str
    rules: list[str]
    digest: str
    offered: object  # its definition, decoded
    approved: object  # the definition approved before, decoded; None when none was
    # How many names its server had mcpd forget, when it is held as maybe forgotten.
    forgotten_names: NotRequired[int]
    # The name agents of the asking profile know it by.
    local: NotRequired[str]


class HeldItems(TypedDict):
    """``mcpd/pins/pending``: what waits for approval."""

    pending: list[HeldItem]


class FoundItem(TypedDict):
    """What a finding rule found in a server's item, as ``mcpd tools --findings``
    lists it."""

    server: str
    kind: str
    name: str
    rule: str
    where: str  # "description", "title", "inputSchema: query.description", ...
    excerpt: str


class FoundItems(TypedDict):
    """``mcpd/pins/findings``: what the rules found."""

    findings: list[FoundItem]


class Approved(TypedDict):
    """What an approval did, by label ("tool search"), and whether it was written."""

    approved: list[str]
    stale: list[str]  # changed again since it was shown: still held
    unknown: list[str]  # not waiting for approval
    # Resources of a server held whole: released with it alone. This and ``saved``, an
    # older daemon leaves out.
    whole_only: NotRequired[list[str]]
    saved: NotRequired[bool]


class PinsImported(TypedDict):
    """What an import of pins did."""

    servers: list[str]
    items: int
    released: int  # held items the import approved
    saved: NotRequired[bool]  # an older daemon leaves it out


class PinsForgotten(TypedDict):
    """The unreadable pin files removed, and the servers approved as they list now."""

    removed: list[str]
    approved: list[str]
