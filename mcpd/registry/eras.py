"""A listed tool as agents of each era are shown it.

The table keeps each tool as its server defined it (what is pinned and reviewed); an
agent is shown what its era's schema allows of it. A 2026-07-28 tool may have an
``outputSchema`` of any kind, such as an array's: a legacy agent gets the tool without
it, as the legacy schema holds only object output schemas and the official SDKs refuse
a whole ``tools/list`` over one that is not. A legacy tool's ``execution`` has no place
in 2026-07-28 (task support is the tasks extension's there): a modern agent gets the
tool without it. The tool itself is listed to both.

``for_era`` projects a listing once; its caller keeps the projection for as long as
the listing stands, so the schemas are read once per listing, not per request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, Raw

from protocol import jsonrpc, mcp

from .shown import Entry


class _Root(msgspec.Struct):
    type: Any = UNSET


_root: Final = msgspec.json.Decoder(_Root)
# A field a tool of the other era may have that this era has no place for.
Field = Literal["outputSchema", "execution"]


class Projected(jsonrpc.Late):
    """A listed tool (a table entry, or a tool of mcpd's own) with a field its agents'
    era has no place for left off."""

    __slots__ = ("field", "item")

    def __init__(self, item: Entry | mcp.Tool, field: Field) -> None:
        self.item = item
        self.field = field

    @property
    def name(self) -> str:
        """The local name it is listed under."""
        return self.item.local if isinstance(self.item, Entry) else self.item.name

    def wire(self) -> mcp.Tool:
        tool = self.item.wire() if isinstance(self.item, Entry) else self.item
        if self.field == "outputSchema":
            return msgspec.structs.replace(tool, outputSchema=UNSET)
        return msgspec.structs.replace(tool, execution=UNSET)


def object_rooted(schema: Raw) -> bool:
    """Whether ``schema`` says its value is an object, as a legacy output schema must."""
    try:
        kind = _root.decode(schema).type
    except (msgspec.DecodeError, RecursionError):
        return False
    return isinstance(kind, str) and kind == "object"


Shown = Entry | mcp.Tool | Projected


def for_era(listing: Sequence[Shown], modern: bool) -> Sequence[Shown]:
    """``listing`` as agents of one era are shown it: the same sequence when no tool in
    it differs for them."""
    out: list[Shown] | None = None
    for i, item in enumerate(listing):
        if isinstance(item, Projected):  # projected already
            field = None
        else:
            field = _out_of_era(item.tool if isinstance(item, Entry) else item, modern)
            if field is not None:
                item = Projected(item, field)
        if field is not None and out is None:
            out = list(listing[:i])
        if out is not None:
            out.append(item)
    return listing if out is None else out


def _out_of_era(tool: mcp.Tool, modern: bool) -> Field | None:
    """The field of ``tool`` agents of the era ``modern`` says have no place for."""
    if modern:
        return "execution" if isinstance(tool.execution, Raw) else None
    schema = tool.outputSchema
    return "outputSchema" if isinstance(schema, Raw) and not object_rooted(schema) else None
