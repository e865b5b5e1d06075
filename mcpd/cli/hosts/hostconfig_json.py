"""A host's JSON file read, and written back with what the user wrote kept as it was.

The stdlib's round trip is not faithful: it reads ``1e400`` as infinity and writes it
back as ``Infinity``, which no host reads as JSON, writes ``1.5E3`` as ``1500.0`` and
cuts a long float's digits, and cannot encode half of a surrogate pair, which Node
writes as an escape. So a number keeps the text it was written with, NaN and Infinity
are refused as the hosts refuse them, and a lone surrogate goes back as its escape.
The document is written with a 2-space indent, each line ended as the file's are.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, NoReturn

import msgspec

_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")


class JsonNumber(msgspec.Struct, frozen=True):
    """A JSON number as its file spells it."""

    text: str


class NotJSON(ValueError):
    """The text is not JSON; the message says where."""


class Unreadable(ValueError):
    """JSON that mcpd cannot take in without losing or misreading some of it."""


def loads(text: str) -> object:
    """The document in ``text``, each number a ``JsonNumber``."""
    try:
        return json.loads(
            text,
            object_pairs_hook=_pairs,
            parse_float=JsonNumber,
            parse_int=JsonNumber,
            parse_constant=_constant,
        )
    except json.JSONDecodeError as exc:
        raise NotJSON(str(exc)) from None
    except RecursionError:
        raise Unreadable("it is nested too deeply to read") from None


def dumps(doc: object, *, eol: str = "\n") -> str:
    """``doc`` as JSON with a 2-space indent, each line ended with ``eol``."""
    out: list[str] = []
    try:
        _dump(doc, "", out)
    except RecursionError:
        raise Unreadable("it is nested too deeply to write back") from None
    # No string's encoding holds a raw newline: each one here ends a line.
    return ("".join(out) + "\n").replace("\n", eol)


def line_ending(text: str) -> str:
    """How ``text`` ends its lines: as its first line does."""
    first, newline, _ = text.partition("\n")
    return "\r\n" if newline and first.endswith("\r") else "\n"


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise Unreadable(f"the key {k!r} appears twice; mcpd would keep only one")
        out[k] = v
    return out


def _constant(word: str) -> NoReturn:
    raise NotJSON(f"{word} is no JSON number (hosts refuse it)")


def _dump(value: object, indent: str, out: list[str]) -> None:
    if isinstance(value, JsonNumber):
        out.append(value.text)
    elif value is None:
        out.append("null")
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, dict):
        _container("{", "}", [(_string(str(k)) + ": ", v) for k, v in value.items()], indent, out)
    elif isinstance(value, list):
        _container("[", "]", [("", v) for v in value], indent, out)
    else:
        raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _container(
    start: str, end: str, items: list[tuple[str, object]], indent: str, out: list[str]
) -> None:
    if not items:
        out.append(start + end)
        return
    inner = indent + "  "
    out.append(start)
    for n, (key, value) in enumerate(items):
        out.append(("," if n else "") + "\n" + inner + key)
        _dump(value, inner, out)
    out.append("\n" + indent + end)


def _string(text: str) -> str:
    return _SURROGATE.sub(
        lambda m: f"\\u{ord(m.group()):04x}", json.dumps(text, ensure_ascii=False)
    )
