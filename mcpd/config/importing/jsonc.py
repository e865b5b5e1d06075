"""JSON as hosts write it by hand: with // and /* */ comments and trailing commas
(JSONC), and with a repeated key reported rather than silently lost."""

from __future__ import annotations

import json
from typing import Any

from ..loading.nesting import MAX_NESTING


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as decoded, duplicate keys and all."""


def read_json(text: str) -> Any:
    """JSON, also with // and /* */ comments and trailing commas (JSONC). Raises
    ValueError for text that is not, or that nests deeper than ``MAX_NESTING``."""
    return json.loads(_strip_jsonc(text), object_pairs_hook=_Pairs)


def _strip_jsonc(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    depth = 0  # counted here, so that no deeper text reaches a recursive reader
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        elif c in "[{":
            depth += 1
            if depth > MAX_NESTING:
                raise ValueError(f"arrays and objects nested more than {MAX_NESTING} levels deep")
            out.append(c)
            i += 1
        elif c in "]}":
            depth -= 1
            # A trailing comma before a closing bracket: drop it.
            k = len(out) - 1
            while k >= 0 and out[k].isspace():
                k -= 1
            if k >= 0 and out[k] == ",":
                out[k] = " "
            out.append(c)
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def objects(node: Any, path: str, notes: list[str]) -> Any:
    """Plain dicts from decoded pairs; a repeated key is reported, the last one wins."""
    if isinstance(node, _Pairs):
        out: dict[str, Any] = {}
        for key, value in node:
            where = f"{path}.{key}" if path else key
            if key in out:
                notes.append(f"{where}: the key appears more than once; the last one wins")
            out[key] = objects(value, where, notes)
        return out
    if isinstance(node, list):
        return [objects(v, f"{path}[{i}]", notes) for i, v in enumerate(node)]
    return node
