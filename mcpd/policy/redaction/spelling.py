"""Finding texts in JSON bytes in the forms JSON encoders write them.

Inside a JSON string ``"``, ``\\`` and controls must be escaped; encoders differ in
what else they escape: all that is not ASCII (Python's by default), ``/`` (some),
``<``, ``>`` and ``&`` (Go's, to be safe in HTML), ``=`` and ``'`` too (Gson's), each
``\\uXXXX`` in lower or upper case hex. ``Spellings`` finds each of its texts in any of
these forms, in the bytes as they came, without decoding them: one search, at C speed,
of all the forms as a tree of their shared beginnings.

A text spelled in a way no encoder writes (each character a ``\\uXXXX``, some escaped
and some not) is none of these forms: only a writer that means to hide a text spells
it so, and such a writer could as well send it encoded any other way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Final, TypeAlias

import msgspec
from msgspec import Raw

_HEX_ESCAPE: Final = re.compile(r"\\u([0-9a-f]{4})")
# What each kind of encoder escapes beyond what JSON requires: none, Go's, Gson's.
_HTML_SAFE: Final = ("", "<>&", "<>&='")


def json_forms(value: str) -> set[bytes]:
    """The byte forms ``value`` takes inside a JSON string as encoders write it, and as
    it is."""
    forms = {value.encode()}
    for text in (
        msgspec.json.encode(value).decode(),
        json.dumps(value),
        json.dumps(value, ensure_ascii=False),
    ):
        inner = text[1:-1]
        for safe in _HTML_SAFE:
            # None of these characters is part of an escape, so each stands for itself.
            escaped = "".join(f"\\u{ord(c):04x}" if c in safe else c for c in inner)
            upper = _HEX_ESCAPE.sub(lambda m: "\\u" + m[1].upper(), escaped)
            for form in (escaped, upper):
                forms.add(form.encode())
                forms.add(form.replace("/", "\\/").encode())
    return forms


_END: Final = -1  # where a form ends, in a tree of forms
_Tree: TypeAlias = dict[int, "_Tree"]


def _as_tree(forms: Iterable[bytes]) -> bytes:
    """A pattern that finds any of ``forms``, written as the tree of their shared
    beginnings: at each byte the search tries only the branches that byte may take,
    where one flat alternation would try every form, which with many secrets makes a
    search of a few megabytes take seconds."""
    root: _Tree = {}
    for form in forms:
        node = root
        for byte in form:
            if _END in node:
                break  # a shorter form ends here: finding it is enough
            node = node.setdefault(byte, {})
        else:
            node.clear()
            node[_END] = {}
    return _branches(root)


def _branches(node: _Tree) -> bytes:
    if _END in node:
        return b""
    parts = []
    for byte in sorted(node):
        run, child = bytes([byte]), node[byte]
        while _END not in child and len(child) == 1:  # a run no other form leaves
            ((next_byte, child),) = child.items()
            run += bytes([next_byte])
        parts.append(re.escape(run) + _branches(child))
    return parts[0] if len(parts) == 1 else b"(?:" + b"|".join(parts) + b")"


class Spellings:
    """Some texts, compiled to be found in JSON bytes in any form an encoder writes."""

    __slots__ = ("_pattern",)

    def __init__(self, values: Iterable[str]) -> None:
        forms = {f for v in values if v for f in json_forms(v)}
        if not forms:
            raise ValueError("no text to find")
        self._pattern = re.compile(_as_tree(forms))

    @classmethod
    def of(cls, values: Iterable[str]) -> Spellings | None:
        """``Spellings`` of ``values``; None when there is none to find."""
        texts = [v for v in values if v]
        return cls(texts) if texts else None

    def found_in(self, data: Raw | bytes) -> bool:
        """Whether JSON bytes ``data`` hold one of the texts, as an encoder writes it."""
        return self._pattern.search(data) is not None
