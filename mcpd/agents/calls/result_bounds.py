"""What a server sends around a tool's result, held to bounds as the result's texts are.

The budget (``result_budget_chars``) holds a result's texts, which a model reads. A
server's JSON-RPC error reaches a model too: hosts show its message as the tool's
text, or as what a prompt, a read or a completion came to. So that message is cut to
the same budget, with a note of how much was cut, as a text is (``error_within``),
wherever mcpd passes a server's error on to an agent: a tool call, a prompts/get, a
resources/read, a completion/complete, a task's request, a failed task's ``error``
(``error_object_within``). Its data is for the host's code: kept when it is no larger
than ``DATA_BYTES``, else replaced by a note of its size. A result's ``_meta`` is for
the host's code as well: one larger than ``META_BYTES`` (or the budget, when that is
more) is left out, and a key of mcpd's says how large it was (``meta_within``); so
are a content block's ``_meta`` and ``annotations`` (``blocks_within``). So is
a progress report's ``_meta`` larger than ``META_BYTES`` (``progress_within``): a report
goes on to the agent as the call runs, outside any result's budget.

Nearly every result and error is far below these bounds. They are measured as the
bytes they came as; nothing is decoded for them unless a part is over its bound.
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

import msgspec
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

# A result's ``_meta`` larger than this, in bytes as the server wrote it, is left out.
META_BYTES: Final = 64 * 1024
# A server error's data larger than this, in bytes as written, is replaced by a note.
DATA_BYTES: Final = 16 * 1024
# The key of the ``_meta`` that stands for one left out: its size and the bound.
META_LEFT_OUT: Final = "mcpd/metaLeftOut"

_MEMBERS: Final = msgspec.json.Decoder(dict[str, Raw])
_BLOCKS: Final = msgspec.json.Decoder(list[dict[str, Raw]])
# What a content block carries for the host's code, not the model, bound as ``_meta``.
BLOCK_PARTS: Final = ("_meta", "annotations")
_encode: Final = msgspec.json.encode

Head = TypeVar("Head", bound=mcp.CallToolResultFate)


def meta_within(raw: Raw, head: Head, budget: int) -> tuple[Raw, Head]:
    """``raw`` (a result, whose head is ``head``) with its ``_meta`` left out when that
    is larger than ``META_BYTES``, or than ``budget`` when that is more (a result no
    longer than the budget is not looked at), and a ``_meta`` of mcpd's in its place
    that says so; else ``raw`` and ``head`` as they are. Every other member goes on as
    it came."""
    meta = head.meta
    bound = max(META_BYTES, budget)
    if not isinstance(meta, Raw) or len(meta) <= bound:
        return raw, head
    try:
        members = _MEMBERS.decode(raw)
    except msgspec.DecodeError:
        return raw, head  # not an object: the result is refused as malformed later
    note = Raw(_encode({META_LEFT_OUT: {"bytes": len(meta), "bound": bound}}))
    members["_meta"] = note
    return Raw(_encode(members)), msgspec.structs.replace(head, meta=note)


def blocks_within(raw: Raw, budget: int) -> Raw:
    """``raw`` (a result longer than ``budget``) with each content block's ``_meta`` and
    ``annotations`` left out when larger than ``META_BYTES``, or than ``budget`` when
    that is more, a note of mcpd's in its place that says so (as ``meta_within``
    writes); ``raw`` itself when none is over, or it cannot be read so far (it is
    refused as malformed later)."""
    bound = max(META_BYTES, budget)
    try:
        members = _MEMBERS.decode(raw)
        content = members.get("content")
        if content is None or len(content) <= bound:
            return raw  # no part of a block can be over
        blocks = _BLOCKS.decode(content)
    except msgspec.DecodeError:
        return raw
    over = False
    for block in blocks:
        for key in BLOCK_PARTS:
            part = block.get(key)
            if part is not None and len(part) > bound:
                block[key] = Raw(_encode({META_LEFT_OUT: {"bytes": len(part), "bound": bound}}))
                over = True
    if not over:
        return raw
    members["content"] = Raw(_encode(blocks))
    return Raw(_encode(members))


def progress_within(params: mcp.ProgressParams) -> mcp.ProgressParams:
    """``params`` (a server's progress report, as it goes to its agent) with its
    ``_meta`` left out when that is larger than ``META_BYTES`` as written, and a
    ``_meta`` of mcpd's in its place that says so; else ``params`` itself."""
    meta = params.meta
    if isinstance(meta, msgspec.UnsetType):
        return params
    size = _size(meta)
    if size <= META_BYTES:
        return params
    note: mcp.Meta = {META_LEFT_OUT: {"bytes": size, "bound": META_BYTES}}
    return msgspec.structs.replace(params, meta=note)


def error_within(exc: rpc.RPCError, budget: int) -> rpc.RPCError:
    """``exc`` (a server's error, as an agent's request ends with it) with its message cut
    to ``budget`` characters and a note of how much was cut, and its data replaced by
    a note of its size when it is larger than ``DATA_BYTES``; ``exc`` itself when
    neither is over."""
    message, data = exc.message, exc.data
    total = len(message)
    size = _size(data)
    if total <= budget and size <= DATA_BYTES:
        return exc
    if total > budget:
        message = (
            f"{message[:budget]}\n[mcpd: {total - budget} more characters were cut here; "
            f"this error's message was {total} characters and the budget is {budget}.]"
        )
    if size > DATA_BYTES:
        data = (
            f"[mcpd: this error's data, {size} bytes, was left out; mcpd passes on "
            f"at most {DATA_BYTES} bytes of it.]"
        )
    return exc.replaced(message, data)


def error_object_within(error: dict[str, object], budget: int) -> dict[str, object]:
    """``error``, a JSON-RPC error object a server wrote within what it told (a failed
    task's ``error``), held to the bounds ``error_within`` holds an error to; as it is
    when it is within them, or is not one (no integer code, no string message)."""
    code, message = error.get("code"), error.get("message")
    if not isinstance(code, int) or not isinstance(message, str):
        return error
    given = rpc.RPCError(code, message, error.get("data", msgspec.UNSET))
    bounded = error_within(given, budget)
    if bounded is given:
        return error
    held = {**error, "message": bounded.message}
    if "data" in error:
        held["data"] = bounded.data
    return held


def _size(data: object) -> int:
    """How many bytes ``data`` takes written: measured as it came when it came as
    bytes, else written out (data of mcpd's making, or one decoded to be changed)."""
    if isinstance(data, Raw):
        return len(data)
    if data is msgspec.UNSET:
        return 0
    value: Any = data
    try:
        return len(_encode(value))
    except (TypeError, msgspec.EncodeError):
        return 0
