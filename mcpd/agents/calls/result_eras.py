"""A tool's result in the shape of the era its agent speaks.

A 2026-07-28 server's result may hold what a legacy agent's SDK refuses, failing a call
that worked: ``structuredContent`` that is not an object (an array, a number), and
``resultType``, which the legacy eras do not have. A legacy agent gets the result
without them; when the left-off ``structuredContent`` was all the result held, a text
block holds its JSON instead, so the model still reads the value.

A server's ``_meta`` may name the server itself
(``io.modelcontextprotocol/serverInfo``): to an agent, mcpd is the server, and says so
where it names itself, so that key is left off for either era. The same holds for the
results of prompts/get, resources/read and completion/complete (``plain_for_era``).

Only a result that needs it is rebuilt, and then only at its top level (and in
``_meta``): every other member is copied as the bytes it came as.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

_members: Final = msgspec.json.Decoder(dict[str, Raw])
_encode: Final = msgspec.json.Encoder().encode
_BRACE: Final = ord("{")


def for_era(raw: Raw, head: mcp.CallToolResultFate, has_content: bool, modern: bool) -> Raw:
    """``raw`` (whose head is ``head``; ``has_content``: whether its ``content`` holds a
    block) as an agent of the era ``modern`` says gets it: the same bytes when nothing
    in it is out of place there."""
    legacy_type = not modern and head.resultType is not UNSET
    loose = not modern and isinstance(head.structuredContent, Raw)
    loose = loose and not _is_object(head.structuredContent)
    names_server = isinstance(head.meta, Raw) and _names_server(head.meta)
    if not (legacy_type or loose or names_server):
        return raw
    top = _members.decode(raw)
    if legacy_type:
        del top["resultType"]
    if loose:
        value = top.pop("structuredContent")
        if not has_content and bytes(value) != b"null":
            text = bytes(value).decode("utf-8", "replace")
            top["content"] = Raw(_encode([mcp.TextContent(text)]))
    if names_server:
        meta = _members.decode(top["_meta"])
        del meta[mcp.KEY_SERVER_INFO]
        if meta:
            top["_meta"] = Raw(_encode(meta))
        else:
            del top["_meta"]
    return Raw(_encode(top))


def _is_object(value: Raw | object) -> bool:
    # A decoded value starts at its first byte: an object at its brace.
    return isinstance(value, Raw) and bool(value) and memoryview(value)[0] == _BRACE


def _names_server(meta: Raw) -> bool:
    """Whether a result's ``_meta`` holds the server's own name for itself."""
    if not _is_object(meta):
        return False
    try:
        return mcp.KEY_SERVER_INFO in _members.decode(meta)
    except (msgspec.DecodeError, RecursionError):
        return False


# Members of a result the legacy eras do not have: any result's, and a read's.
LEGACY_NONE: Final = ("resultType",)
LEGACY_NONE_READ: Final = ("resultType", "ttlMs", "cacheScope")
_SERVER_INFO: Final = mcp.KEY_SERVER_INFO.encode()


def plain_for_era(
    result: Raw | rpc.JsonObject, modern: bool, absent: tuple[str, ...] = LEGACY_NONE
) -> Raw | rpc.JsonObject:
    """A result other than a tool's (a prompt's, a read's, a completion) as an agent
    of the era ``modern`` says gets it: for a legacy agent without the members
    ``absent`` names, which its era does not have; for either without the server's
    name for itself in ``_meta``. The same bytes when nothing in them is out of place."""
    if isinstance(result, Raw):
        data = bytes(result)
        named = _SERVER_INFO in data
        if not named and (modern or not any(key.encode() in data for key in absent)):
            return result
        try:
            decoded = msgspec.json.decode(data)
        except (msgspec.DecodeError, RecursionError):
            return result
        if not isinstance(decoded, dict):
            return result
        return _plain(decoded, modern, absent)
    return _plain(result, modern, absent)


def _plain(result: dict[str, Any], modern: bool, absent: tuple[str, ...]) -> dict[str, Any]:
    if not modern:
        for key in absent:
            result.pop(key, None)
    meta = result.get("_meta")
    if isinstance(meta, dict) and mcp.KEY_SERVER_INFO in meta:
        del meta[mcp.KEY_SERVER_INFO]
        if not meta:
            del result["_meta"]
    return result


def with_result_type(result: object) -> object:
    """mcpd's own result to a modern request, with the ``resultType`` every one carries:
    its own methods and ``ping`` answer with a plain object, the MCP ones with a struct
    whose field may be unset."""
    if isinstance(result, dict):
        return {"resultType": mcp.COMPLETE, **result}
    if isinstance(result, msgspec.Struct) and "resultType" not in result.__struct_fields__:
        # A document of mcpd's own (its status): the key goes first, as on a plain object.
        return {"resultType": mcp.COMPLETE, **msgspec.json.decode(msgspec.json.encode(result))}
    if (
        isinstance(result, msgspec.Struct)
        # The result types share the field by name, not by a base class.
        and "resultType" in result.__struct_fields__
        and msgspec.structs.asdict(result)["resultType"] is UNSET
    ):
        return msgspec.structs.replace(result, resultType=mcp.COMPLETE)
    return result
