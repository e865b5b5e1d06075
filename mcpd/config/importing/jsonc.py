"""JSON as hosts write it by hand: with // and /* */ comments and trailing commas
(JSONC), and with a repeated key reported rather than silently lost."""

from __future__ import annotations

import json
from typing import Final, TypeAlias

from protocol.jsonrpc import messages as rpc

from .jsonc_text import strip_jsonc

_QUOTED_MAX: Final = 80  # characters of a value a note quotes as it is


class Pairs:
    """A JSON object as decoded, duplicate keys and all."""

    __slots__ = ("items",)

    def __init__(self, items: list[tuple[str, Decoded]]) -> None:
        self.items = items


# JSON as ``read_json`` decodes it: an object is its pairs, until ``objects`` makes
# it one.
Decoded: TypeAlias = "Pairs | list[Decoded] | str | int | float | bool | None"


def read_json(text: str) -> Decoded:
    """JSON, also with // and /* */ comments and trailing commas (JSONC). Raises
    ValueError for text that is not, or that nests deeper than ``MAX_NESTING``."""
    decoded: Decoded = json.loads(strip_jsonc(text), object_pairs_hook=Pairs)
    return decoded


def objects(node: Decoded, path: str, notes: list[str]) -> rpc.Json:
    """Plain dicts from decoded pairs; a repeated key is reported, the last one wins."""
    if isinstance(node, Pairs):
        out: rpc.JsonObject = {}
        for key, value in node.items:
            where = f"{path}.{key}" if path else key
            if key in out:
                notes.append(f"{where}: the key appears more than once; the last one wins")
            out[key] = objects(value, where, notes)
        return out
    if isinstance(node, list):
        return [objects(v, f"{path}[{i}]", notes) for i, v in enumerate(node)]
    return node


def kind_in_words(value: rpc.Json) -> str:
    """What a value of a host's file is, in words (never its text, which may be a
    secret written in the wrong place)."""
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else "an object"


def array(value: rpc.Json) -> list[rpc.Json]:
    """An array of a host's file, or none where it is not one (said where it is checked)."""
    return value if isinstance(value, list) else []


def object_of(value: rpc.Json) -> rpc.JsonObject:
    """An object of a host's file, or none where it is not one (said where it is checked)."""
    return value if isinstance(value, dict) else {}


def quoted_or_sized(value: rpc.Json) -> str:
    """A value of a host's file as a note quotes it: as written when it is short, else
    by its kind and size, so that the note stays a line one can read."""
    if isinstance(value, str) and len(value) > _QUOTED_MAX:
        return f"a string {len(value)} characters long"
    text = repr(value)
    if len(text) <= _QUOTED_MAX:
        return text
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return f"{kind_in_words(value)} {len(text)} {'digits' if number else 'characters'} long"
