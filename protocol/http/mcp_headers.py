"""MCP request headers for Streamable HTTP (2026-07-28), sans-IO.

Modern requests mirror parts of the JSON-RPC body into headers so intermediaries can
route without parsing the body: ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``
and one ``Mcp-Param-<Name>`` per argument a tool marks with ``x-mcp-header``. Values
that are not plain visible ASCII travel in the ``=?base64?...?=`` sentinel form.

A tool whose ``x-mcp-header`` annotations break the rules must be dropped from the
tool list, so ``header_params`` either returns the complete header map or raises
``InvalidHeaderAnnotation`` with a reason fit for a warning.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any, Final, TypeAlias

import msgspec

PROTOCOL_VERSION: Final = "MCP-Protocol-Version"
METHOD: Final = "Mcp-Method"
NAME: Final = "Mcp-Name"
PARAM_PREFIX: Final = "Mcp-Param-"
ANNOTATION: Final = "x-mcp-header"

# The headers an MCP HTTP transport writes itself (lower case): neither a server's
# configuration nor a caller may set them.
TRANSPORT_HEADERS: Final = frozenset(
    {
        "host",
        "content-type",
        "content-length",
        "transfer-encoding",
        "connection",
        "accept",
        "accept-encoding",
        "mcp-session-id",
    }
)

# Which params member Mcp-Name mirrors, per method.
NAME_SOURCE: Final[Mapping[str, str]] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
}

MAX_SAFE_INTEGER: Final = 2**53 - 1

_SENTINEL_PREFIX: Final = "=?base64?"
_SENTINEL_SUFFIX: Final = "?="
# Visible ASCII, with spaces and tabs allowed only between visible characters.
_PLAIN: Final = re.compile(r"[\x21-\x7e](?:[\x21-\x7e \t]*[\x21-\x7e])?")
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_PRIMITIVES: Final = frozenset({"string", "integer", "boolean"})

# JSON Schema keywords whose values are subschemas, by shape. Everything else
# (const, enum, default, examples, ...) is data and may hold any keys at all.
_ONE_SCHEMA: Final = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
    }
)
_SCHEMA_LIST: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SCHEMA_MAP: Final = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
_MAX_DEPTH: Final = 64
_MAX_NODES: Final = 10_000

PropertyPath: TypeAlias = tuple[str, ...]


class HeaderValueError(ValueError):
    """A value that cannot be sent or read as an MCP header value."""


class InvalidHeaderAnnotation(ValueError):
    """A tool's ``x-mcp-header`` annotations break the rules; the tool must be dropped."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --- value encoding ---------------------------------------------------------------


def is_token(name: str) -> bool:
    """An RFC 9110 token: what a header name may be."""
    return _TOKEN.fullmatch(name) is not None


def is_plain(value: str) -> bool:
    """Visible ASCII, with spaces and tabs only inside: a header value sent as is."""
    return _PLAIN.fullmatch(value) is not None


def looks_like_sentinel(value: str) -> bool:
    return value.startswith(_SENTINEL_PREFIX) and value.endswith(_SENTINEL_SUFFIX)


def needs_encoding(value: str) -> bool:
    return not is_plain(value) or looks_like_sentinel(value)


def encode_value(value: str) -> str:
    """The header form of ``value``: as is when plain, else the base64 sentinel."""
    if not needs_encoding(value):
        return value
    encoded = base64.b64encode(value.encode("utf-8")).decode("ascii")
    return f"{_SENTINEL_PREFIX}{encoded}{_SENTINEL_SUFFIX}"


def decode_value(value: str) -> str:
    """The value a header carries, undoing the base64 sentinel if present."""
    if not looks_like_sentinel(value) or len(value) < len(_SENTINEL_PREFIX + _SENTINEL_SUFFIX):
        return value
    inner = value[len(_SENTINEL_PREFIX) : -len(_SENTINEL_SUFFIX)]
    try:
        return base64.b64decode(inner, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise HeaderValueError(f"bad base64 sentinel value: {exc}") from None


# --- standard request headers -----------------------------------------------------


def request_headers(version: str, method: str, name: str | None = None) -> dict[str, str]:
    """``MCP-Protocol-Version``, ``Mcp-Method`` and, when given, ``Mcp-Name``.

    ``name`` is ``params.name`` (tools/call, prompts/get) or ``params.uri``
    (resources/read); see ``NAME_SOURCE``.
    """
    headers = {PROTOCOL_VERSION: version, METHOD: method}
    if method in NAME_SOURCE:
        if name is None:
            raise HeaderValueError(f"{method} needs {NAME} (params.{NAME_SOURCE[method]})")
        headers[NAME] = encode_value(name)
    return headers


# --- x-mcp-header ------------------------------------------------------------------


def header_params(
    input_schema: Mapping[str, object] | msgspec.Raw | bytes,
) -> dict[str, PropertyPath]:
    """Validate a tool's ``x-mcp-header`` annotations.

    Returns ``{"Mcp-Param-<Name>": (property, nested property, ...)}``, empty when
    the tool has none. Raises ``InvalidHeaderAnnotation`` when the tool must go.
    """
    schema: Any = input_schema
    if isinstance(input_schema, (bytes, msgspec.Raw)):
        try:
            schema = msgspec.json.decode(input_schema)
        except (msgspec.DecodeError, RecursionError) as exc:
            raise InvalidHeaderAnnotation(f"inputSchema is not valid JSON: {exc}") from None
    if not isinstance(schema, Mapping):
        raise InvalidHeaderAnnotation("inputSchema is not an object")
    found: dict[str, PropertyPath] = {}
    seen: dict[str, str] = {}
    # (subschema, property path, reached through properties alone, where, depth)
    stack: list[tuple[Any, PropertyPath, bool, str, int]] = [(schema, (), True, "inputSchema", 0)]
    nodes = 0
    while stack:
        node, path, direct, where, depth = stack.pop()
        nodes += 1
        if nodes > _MAX_NODES:
            raise InvalidHeaderAnnotation(f"inputSchema has more than {_MAX_NODES} subschemas")
        if depth > _MAX_DEPTH:
            raise InvalidHeaderAnnotation(f"inputSchema nests deeper than {_MAX_DEPTH} levels")
        if not isinstance(node, Mapping):
            continue
        depth += 1
        if ANNOTATION in node:
            header = _check_annotation(node, path, direct, where)
            folded = header.lower()
            if folded in seen:
                raise InvalidHeaderAnnotation(
                    f"{ANNOTATION} {header!r} at {where} repeats {seen[folded]!r}"
                    " (header names ignore case)"
                )
            seen[folded] = header
            found[PARAM_PREFIX + header] = path
        for key, value in node.items():
            if key == "properties" and isinstance(value, Mapping):
                for prop, sub in value.items():
                    stack.append((sub, (*path, prop), direct, f"{where}/properties/{prop}", depth))
            elif key in _SCHEMA_MAP and isinstance(value, Mapping):
                for name, sub in value.items():
                    stack.append((sub, path, False, f"{where}/{key}/{name}", depth))
            elif key in _SCHEMA_LIST and isinstance(value, list):
                for i, sub in enumerate(value):
                    stack.append((sub, path, False, f"{where}/{key}/{i}", depth))
            elif key in _ONE_SCHEMA:
                stack.append((value, path, False, f"{where}/{key}", depth))
            elif key == "dependencies" and isinstance(value, Mapping):
                # Draft-7: each value is a schema or a list of property names.
                for name, sub in value.items():
                    stack.append((sub, path, False, f"{where}/{key}/{name}", depth))
    return found


def _check_annotation(node: Mapping[str, Any], path: PropertyPath, direct: bool, where: str) -> str:
    header = node[ANNOTATION]
    if not isinstance(header, str):
        raise InvalidHeaderAnnotation(f"{ANNOTATION} at {where} is not a string")
    if not header:
        raise InvalidHeaderAnnotation(f"{ANNOTATION} at {where} is empty")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in header):
        raise InvalidHeaderAnnotation(f"{ANNOTATION} at {where} contains control characters")
    if not is_token(header):
        raise InvalidHeaderAnnotation(f"{ANNOTATION} {header!r} at {where} is not an HTTP token")
    if not direct or not path:
        raise InvalidHeaderAnnotation(
            f"{ANNOTATION} {header!r} at {where} is not reachable through properties alone"
        )
    kind = _primitive_type(node.get("type"))
    if kind is None:
        raise InvalidHeaderAnnotation(
            f"{ANNOTATION} {header!r} at {where} is on a property whose type is "
            f"{node.get('type')!r}, not string, integer or boolean"
        )
    return header


def _primitive_type(declared: Any) -> str | None:
    if isinstance(declared, str):
        return declared if declared in _PRIMITIVES else None
    if isinstance(declared, list):
        # A nullable primitive, e.g. ["string", "null"]: a null argument sends no header.
        kinds = [t for t in declared if t != "null"]
        if len(kinds) == 1 and isinstance(kinds[0], str) and kinds[0] in _PRIMITIVES:
            return kinds[0]
    return None


def param_headers(
    params: Mapping[str, PropertyPath], arguments: Mapping[str, object] | None
) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers for one call's ``arguments``.

    Absent and null values send no header. Raises ``HeaderValueError`` for a value
    no header can carry (an object, a fraction, an integer beyond 2^53-1).
    """
    out: dict[str, str] = {}
    if not arguments:
        return out
    for header, path in params.items():
        value: Any = arguments
        for key in path:
            if not isinstance(value, Mapping) or key not in value:
                value = None
                break
            value = value[key]
        if value is None:
            continue
        out[header] = _header_text(header, value)
    return out


def _header_text(header: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise HeaderValueError(f"{header}: integer {value} is outside ±(2^53-1)")
        return str(value)
    if isinstance(value, str):
        return encode_value(value)
    raise HeaderValueError(f"{header}: a {type(value).__name__} cannot be sent as a header")
