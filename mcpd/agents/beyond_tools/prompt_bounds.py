"""What a prompts/get may ask and a completion may give, held to the protocol's shape.

A prompt's ``arguments`` are an object of strings: anything else is refused before its
server is asked, naming the argument. A completion offers at most ``MAX_VALUES``
values: a server's longer list is cut to that, marked as having more, with its
``total`` kept (or set to the count it gave).
"""

from __future__ import annotations

from typing import Final

import msgspec
from msgspec import Raw, UnsetType

from protocol.jsonrpc import messages as rpc

MAX_VALUES: Final = 100
_KINDS: Final = {
    str: "a string",
    list: "an array",
    dict: "an object",
    bool: "a boolean",
    type(None): "null",
}


def _kind(value: object) -> str:
    return _KINDS.get(type(value), "a number")


def check_arguments(arguments: Raw | UnsetType) -> None:
    """Refuses ``arguments`` of a prompts/get that are not an object of strings."""
    if isinstance(arguments, UnsetType):
        return
    decoded = msgspec.json.decode(arguments)
    if not isinstance(decoded, dict):
        raise rpc.RPCError(
            rpc.INVALID_PARAMS,
            f"prompt arguments are an object of strings, not {_kind(decoded)}",
        )
    for name, value in decoded.items():
        if not isinstance(value, str):
            raise rpc.RPCError(
                rpc.INVALID_PARAMS,
                f"the prompt argument {name[:200]!r} is {_kind(value)}: arguments are strings",
                {"argument": name[:200]},
            )


class _Values(msgspec.Struct):
    values: list[Raw] = []


class _Completed(msgspec.Struct):
    completion: _Values | None = None


def capped_completion(raw: Raw) -> rpc.JsonObject | None:
    """``raw``, a completion/complete result, cut to ``MAX_VALUES`` values (None: it
    offers no more than that, and is left as it is)."""
    try:
        head = msgspec.json.decode(raw, type=_Completed)
    except msgspec.DecodeError:
        return None  # not the shape to cut: passed on for the agent to judge
    if head.completion is None or len(head.completion.values) <= MAX_VALUES:
        return None
    decoded = msgspec.json.decode(raw)
    completion = decoded["completion"]
    values = completion["values"]
    total = completion.get("total")
    completion["values"] = values[:MAX_VALUES]
    completion["hasMore"] = True
    if not isinstance(total, int) or isinstance(total, bool) or total < len(values):
        completion["total"] = len(values)
    result: rpc.JsonObject = decoded
    return result
