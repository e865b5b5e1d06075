"""What a server's tool must look like before agents are shown it.

``Tool`` keeps the schemas and icons as raw bytes, so any JSON decodes. But hosts
validate the whole list they are given: the official SDKs refuse a ``tools/list``
in which one tool's ``inputSchema`` is not an object, or its ``icons`` not an array,
and then every tool of every server is gone for that host. So a tool whose input
schema cannot be an object schema is left out (with the reason, as for other
dropped tools), as is one whose name is empty, and an optional field of the wrong
kind is left off the tool, as is one holding what no host takes (``toolfields``; an
input schema holding such leaves the tool out). An output schema of any kind of value
is kept, as 2026-07-28 allows: a legacy agent is listed the tool without one that is
not an object's (``registry.tables.eras``). A tool, or a prompt, whose local name
would hold a secret mcpd holds is left out (``named_a_secret``).
"""

from __future__ import annotations

from typing import Final

import msgspec
from msgspec import UNSET, Raw

from protocol.http import mcp_headers
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.shown.visible import quote

from ...policy.redaction.guard import SecretGuard
from ...registry.gating.limits import NAMED_A_SECRET, ListTrim, short_name
from ...registry.naming.facing import sanitize
from . import toolfields

_OBJECT_TYPE: Final = Raw(b'{"type":"object"}')
_NOT_ITS_KIND: Final = "not the JSON type MCP gives it"


def _kind(raw: Raw) -> bytes:
    """The first byte of a JSON value (a decoded Raw starts at its value): b"{" for an
    object, b"[" for an array."""
    return bytes(memoryview(raw)[:1])


def accepted(item: Raw, trim: ListTrim) -> mcp.Tool | None:
    """One tool of a listed page as agents may see it, or None when it is left out
    (``trim`` is told why, and of what was left off it)."""
    try:
        tool = rpc.decode_as(item, mcp.Tool)
    except rpc.InvalidParams as exc:
        trim.drop("(malformed)", str(exc))
        return None
    if not trim.addressable(tool):
        return None
    shaped, reason, removed = checked_tool(tool)
    if shaped is None:
        trim.drop(short_name(tool.name), reason or "")
        return None
    kinds = [field for field, why in removed if why is _NOT_ITS_KIND]
    if kinds:
        trim.mended(
            short_name(tool.name), f"listed without its {', '.join(kinds)}: {_NOT_ITS_KIND}"
        )
    for field, why in removed:
        if why is not _NOT_ITS_KIND:
            trim.mended(short_name(tool.name), f"listed without its {field}: {why}")
    return _detached(tool)


def header_paths(tool: mcp.Tool, trim: ListTrim) -> dict[str, mcp_headers.PropertyPath] | None:
    """The Mcp-Param-* headers a tool's arguments go in over HTTP, by header name, or
    None when an annotation is one no header can be made of (``trim`` is told, and the
    tool is to be left out). Read only of a tool the list keeps: another definition
    listed under its name must not decide which argument values leave in headers."""
    try:
        return mcp_headers.header_params(tool.inputSchema)
    except mcp_headers.InvalidHeaderAnnotation as exc:
        trim.drop(short_name(tool.name), exc.reason)
        return None


def _detached(tool: mcp.Tool) -> mcp.Tool:
    """The tool with its raw parts copied out of the page they were decoded from: a
    kept tool must not keep its whole page's bytes alive (about 220 B a tool)."""
    tool.inputSchema = tool.inputSchema.copy()
    if isinstance(tool.outputSchema, Raw):
        tool.outputSchema = tool.outputSchema.copy()
    if isinstance(tool.icons, Raw):
        tool.icons = tool.icons.copy()
    if isinstance(tool.execution, Raw):
        tool.execution = tool.execution.copy()
    return tool


def checked_tool(tool: mcp.Tool) -> tuple[mcp.Tool | None, str | None, list[tuple[str, str]]]:
    """The tool as agents may see it (None to leave it out), why it is left out, and
    the optional fields taken off it, each with why."""
    schema = tool.inputSchema
    if _kind(schema) != b"{":
        return None, f"inputSchema is not a JSON object ({_describe(schema)})", []
    # Decoded even when it starts with the object type: a type repeated later is the
    # one hosts read.
    root = toolfields.schema_members.decode(schema)
    if root.type is UNSET:
        # Arguments are always an object, so saying so changes nothing for a
        # validator; but TypeScript hosts refuse a schema without the type.
        tool.inputSchema = _with_object_type(schema)
    elif root.type != "object":
        return None, f'inputSchema has type {_type_words(root.type)}, not "object"', []
    fault = toolfields.schema_fault(root)
    if fault is not None:
        # Its arguments cannot be told apart from what the server means by it.
        return None, f"inputSchema: {fault}", []
    removed: list[tuple[str, str]] = []
    output = tool.outputSchema
    if isinstance(output, Raw):
        why = _NOT_ITS_KIND if _kind(output) != b"{" else _output_fault(output)
        if why is not None:
            tool.outputSchema = UNSET
            removed.append(("outputSchema", why))
    if isinstance(tool.icons, Raw):
        why = _NOT_ITS_KIND if _kind(tool.icons) != b"[" else toolfields.icons_fault(tool.icons)
        if why is not None:
            tool.icons = UNSET
            removed.append(("icons", why))
    if isinstance(tool.execution, Raw):
        execution = tool.execution
        why = _NOT_ITS_KIND if _kind(execution) != b"{" else toolfields.execution_fault(execution)
        if why is not None:
            tool.execution = UNSET
            removed.append(("execution", why))
    return tool, None, removed


def _output_fault(schema: Raw) -> str | None:
    try:
        return toolfields.schema_fault(toolfields.schema_members.decode(schema))
    except (msgspec.DecodeError, RecursionError):
        return _NOT_ITS_KIND


def _with_object_type(schema: Raw) -> Raw:
    body = bytes(schema).strip()[1:].lstrip()
    if body == b"}":
        return _OBJECT_TYPE
    return Raw(b'{"type":"object",' + body)


def _describe(raw: Raw) -> str:
    return quote(bytes(raw).decode("utf-8", "replace").strip(), 40)


def _type_words(value: object) -> str:
    """A schema's type as the server wrote it, quoted (JSON for what is no string)."""
    return quote(value if isinstance(value, str) else msgspec.json.encode(value).decode())


def named_a_secret(guard: SecretGuard, alias: str, name: str, trim: ListTrim) -> bool:
    """Whether the tool or prompt the server calls ``name`` is left out: the local name
    made of it (every character outside ``[A-Za-z0-9_-]`` made ``_``) holds a secret
    mcpd holds, which the server's own spelling of it hid (``NAMED_A_SECRET``)."""
    made = sanitize(name)
    if made == name:
        return False  # searched as the server sent it
    masked = guard.text(alias, made, "a name agents would know an item by")
    if masked == made:
        return False
    trim.drop("(named after a secret)", f"{NAMED_A_SECRET} ({masked})")
    return True
