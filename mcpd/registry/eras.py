"""A listed tool as agents of each era are shown it.

The table keeps each tool as its server defined it (what is pinned and reviewed); an
agent is shown what its era's schema allows of it. A 2026-07-28 tool may have an
``outputSchema`` of any kind, such as an array's: a legacy agent gets the tool without
it, as the legacy schema holds only object output schemas and the official SDKs refuse
a whole ``tools/list`` over one that is not. Where a 2026-07-28 schema gives a property
the schema ``true`` or ``false`` (JSON Schema 2020-12 allows a boolean wherever a
schema stands), a legacy agent is shown the same schema written as objects, ``{}`` and
``{"not": {}}``, as its SDKs take only objects there. A legacy agent is offered no
tasks, so a tool marked as run only as a task is shown it without ``execution``: mcpd
runs such a tool for it. A legacy tool's ``execution`` has no place in 2026-07-28 (task
support is the tasks extension's there): a modern agent gets the tool without it. The
tool itself is listed to both.

``for_era`` projects a listing once; its caller keeps the projection for as long as
the listing stands, so the schemas are read once per listing, not per request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw, UnsetType

from protocol import jsonrpc, mcp

from .shown import Entry


class _Root(msgspec.Struct):
    type: Any = UNSET


class _Execution(msgspec.Struct):
    taskSupport: Any = None


_root: Final = msgspec.json.Decoder(_Root)
_execution: Final = msgspec.json.Decoder(_Execution)
# How deep in a schema a boolean subschema is written as an object; deeper ones are
# left as they are (the SDKs look at the properties of the schema's root).
SCHEMA_DEPTH: Final = 32
# Keywords whose value is a schema, and those whose value is a map or list of them.
_ONE: Final = frozenset(
    {
        "additionalProperties",
        "items",
        "contains",
        "not",
        "if",
        "then",
        "else",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "additionalItems",
        "contentSchema",
    }
)
_MAP: Final = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
_LIST: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})


class Projected(jsonrpc.Late):
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
    """``schema`` with each boolean subschema written as the object schema that means
    the same, or None when it has none (or is not JSON mcpd can read)."""
    data = bytes(schema)
    if b"true" not in data and b"false" not in data:
        return None
    try:
        value = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    rewritten, changed = _objects(value, SCHEMA_DEPTH)
    return Raw(msgspec.json.encode(rewritten)) if changed else None


def _objects(schema: object, depth: int) -> tuple[object, bool]:
    """A subschema with the booleans in it written as objects, and whether any was."""
    if isinstance(schema, bool):
        # A fresh object each time: the rewritten schema shares nothing.
        return ({} if schema else {"not": {}}), True
    if not isinstance(schema, dict) or depth == 0:
        return schema, False
    changed = False
    out: dict[str, object] = {}
    for key, value in schema.items():
        if key in _ONE:
            value, did = _objects(value, depth - 1)
        elif key in _MAP and isinstance(value, dict):
            pairs = [(k, _objects(v, depth - 1)) for k, v in value.items()]
            did = any(d for _, (_, d) in pairs)
            value = {k: v for k, (v, _) in pairs}
        elif key in _LIST and isinstance(value, list):
            items = [_objects(v, depth - 1) for v in value]
            did = any(d for _, d in items)
            value = [v for v, _ in items]
        else:
            did = False
        changed = changed or did
        out[key] = value
    return out, changed


Shown = Entry | mcp.Tool | Projected


def for_era(listing: Sequence[Shown], modern: bool) -> Sequence[Shown]:
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
