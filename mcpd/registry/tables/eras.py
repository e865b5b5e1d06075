"""A listed tool as agents of each era are shown it.

The table keeps each tool as its server defined it (what is pinned and reviewed); an
agent is shown what its era's schema allows of it. A 2026-07-28 tool may have an
``outputSchema`` of any kind, such as an array's: a legacy agent gets the tool without
it, as the legacy schema holds only object output schemas and the official SDKs refuse
a whole ``tools/list`` over one that is not. Where a schema's root gives a property the
schema ``true`` or ``false`` (JSON Schema 2020-12 allows a boolean wherever a schema
stands), a legacy agent is shown that property written as an object, ``{}`` or
``{"not": {}}``, as its SDKs take only objects there; every other byte of the schema
is the server's. A legacy agent is offered no
tasks, so a tool marked as run only as a task is shown it without ``execution``: mcpd
runs such a tool for it. A legacy tool's ``execution`` has no place in 2026-07-28 (task
support is the tasks extension's there): a modern agent gets the tool without it. The
tool itself is listed to both.

``listing_for_era`` projects a listing once; its caller keeps the projection for as long as
the listing stands, so the schemas are read once per listing, not per request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

from .shown import Entry


class _Root(msgspec.Struct):
    type: Any = UNSET


class _Execution(msgspec.Struct):
    taskSupport: Any = None


class _Properties(msgspec.Struct):
    properties: dict[str, Raw] | None = None


_root: Final = msgspec.json.Decoder(_Root)
_properties: Final = msgspec.json.Decoder(_Properties)
_members: Final = msgspec.json.Decoder(dict[str, Raw])
_encode: Final = msgspec.json.Encoder().encode
# A boolean schema and the object schema that means the same.
_BOOLEANS: Final = {b"true": Raw(b"{}"), b"false": Raw(b'{"not":{}}')}
_execution: Final = msgspec.json.Decoder(_Execution)


class Projected(rpc.Late):
    """A listed tool (a table entry, or a tool of mcpd's own) as its agents' era is
    shown it: a field it has no place for left off, a schema written as it takes it."""

    __slots__ = ("execution_off", "input_schema", "item", "output_schema")

    def __init__(
        self,
        item: Entry | mcp.Tool,
        input_schema: Raw | None = None,
        output_schema: Raw | UnsetType | None = None,
        execution_off: bool = False,
    ) -> None:
        self.item = item
        # None: as the tool has it.
        self.input_schema = input_schema
        self.output_schema = output_schema
        self.execution_off = execution_off

    @property
    def name(self) -> str:
        """The local name it is listed under."""
        return self.item.local if isinstance(self.item, Entry) else self.item.name

    def wire(self) -> mcp.Tool:
        tool = self.item.wire() if isinstance(self.item, Entry) else self.item
        return msgspec.structs.replace(
            tool,
            inputSchema=tool.inputSchema if self.input_schema is None else self.input_schema,
            outputSchema=tool.outputSchema if self.output_schema is None else self.output_schema,
            execution=UNSET if self.execution_off else tool.execution,
        )


def object_rooted(schema: Raw) -> bool:
    """Whether ``schema`` says its value is an object, as a legacy output schema must."""
    try:
        kind = _root.decode(schema).type
    except (msgspec.DecodeError, RecursionError):
        return False
    return isinstance(kind, str) and kind == "object"


def without_booleans(schema: Raw) -> Raw | None:
    """``schema`` with each boolean its root's ``properties`` give written as the object
    schema that means the same, or None when it has none (or is not JSON mcpd can read).

    Only there: the legacy SDKs check that each property is an object and refuse the
    whole list over one that is not, while a boolean anywhere else (such as
    ``additionalProperties: false``, which strict tool-calling APIs ask for by that
    spelling) they take, and a host passes on as the server wrote it."""
    data = bytes(schema)
    if b"true" not in data and b"false" not in data:
        return None
    try:
        properties = _properties.decode(data).properties
    except (msgspec.DecodeError, RecursionError):
        return None  # not an object, or its properties are not a map: left as it is
    if properties is None or not any(bytes(v) in _BOOLEANS for v in properties.values()):
        return None
    top = _members.decode(data)
    top["properties"] = Raw(
        _encode({name: _BOOLEANS.get(bytes(v), v) for name, v in properties.items()})
    )
    return Raw(_encode(top))


Shown = Entry | mcp.Tool | Projected


def listing_for_era(listing: Sequence[Shown], modern: bool) -> Sequence[Shown]:
    """``listing`` as agents of one era are shown it: the same sequence when no tool in
    it differs for them."""
    out: list[Shown] | None = None
    for i, item in enumerate(listing):
        projected = None
        if not isinstance(item, Projected):  # else projected already
            tool = item.tool if isinstance(item, Entry) else item
            projected = _modern(item, tool) if modern else _legacy(item, tool)
            if projected is not None:
                item = projected
        if projected is not None and out is None:
            out = list(listing[:i])
        if out is not None:
            out.append(item)
    return listing if out is None else out


def _modern(item: Entry | mcp.Tool, tool: mcp.Tool) -> Projected | None:
    return Projected(item, execution_off=True) if isinstance(tool.execution, Raw) else None


def _legacy(item: Entry | mcp.Tool, tool: mcp.Tool) -> Projected | None:
    input_schema = without_booleans(tool.inputSchema)
    output_schema: Raw | UnsetType | None = None
    if isinstance(tool.outputSchema, Raw):
        if not object_rooted(tool.outputSchema):
            output_schema = UNSET
        else:
            output_schema = without_booleans(tool.outputSchema)
    execution_off = isinstance(tool.execution, Raw) and _task_only(tool.execution)
    if input_schema is None and output_schema is None and not execution_off:
        return None
    return Projected(item, input_schema, output_schema, execution_off)


def _task_only(execution: Raw) -> bool:
    if b"required" not in bytes(execution):
        return False
    try:
        support = _execution.decode(execution).taskSupport
    except (msgspec.DecodeError, RecursionError):
        return False
    return isinstance(support, str) and support == "required"
