"""JSONC's text (JSON with // and /* */ comments and trailing commas, as hosts write it
by hand) made JSON, and told apart from JSON."""

from __future__ import annotations

import json
from typing import NoReturn

from ..loading.nesting import MAX_NESTING


def strip_jsonc(text: str) -> str:
    """``text`` with its comments and trailing commas blanked out. Raises ValueError
    for text that nests deeper than ``MAX_NESTING``."""
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


def is_jsonc(text: str) -> bool:
    """Whether ``text`` is JSON once its comments and trailing commas are dropped (NaN
    and Infinity, which no host reads, aside)."""
    try:
        json.loads(strip_jsonc(text), parse_constant=_no_constant)
    except ValueError:
        return False
    return True


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")
