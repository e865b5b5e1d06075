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
from typing import Final

import msgspec
from msgspec import Raw

_HEX_ESCAPE: Final = re.compile(r"\\u([0-9a-f]{4})")
# What each kind of encoder escapes beyond what JSON requires: none, Go's, Gson's.
_HTML_SAFE: Final = ("", "<>&", "<>&='")
_ESCAPES: Final = {safe: {ord(c): f"\\u{ord(c):04x}" for c in safe} for safe in _HTML_SAFE}


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
            escaped = inner.translate(_ESCAPES[safe])
            upper = _HEX_ESCAPE.sub(lambda m: "\\u" + m[1].upper(), escaped)
            for form in (escaped, upper):
                forms.add(form.encode())
                forms.add(form.replace("/", "\\/").encode())
    return forms


def tree_pattern(forms: Iterable[bytes]) -> bytes:
    """A pattern that finds any of ``forms``, written as the tree of their shared
    beginnings: at each byte the search tries only the branches that byte may take,
    where one flat alternation would try every form, which with many secrets makes a
    search of a few megabytes take seconds.

    Built from the forms in sorted order, where those that share a beginning stand
    together: what a group of them shares is found by comparing its first and its last
    at C speed, so the Python steps are a few a branch however long the forms are, and
    the work grows with their length, never with its square."""
    kept: list[bytes] = []
    for form in sorted(forms):
        if not form:
            return b""  # an empty form is found anywhere
        if kept and form.startswith(kept[-1]):
            continue  # a shorter form ends here: finding it is enough
        kept.append(form)
    return _branches(kept, 0) if kept else b""


def _branches(forms: list[bytes], depth: int) -> bytes:
    """The pattern of ``forms`` (sorted, none the beginning of another, all sharing
    their first ``depth`` bytes) from ``depth`` on."""
    if len(forms[0]) == depth:
        return b""  # the one form ends here
    parts = []
    begin = 0
    while begin < len(forms):
        byte = forms[begin][depth]
        end = begin + 1
        while end < len(forms) and forms[end][depth] == byte:
            end += 1
        # Sorted, the first and the last of a group share no more than any two of it.
        first, last = forms[begin], forms[end - 1]
        shared = _shared_length(first, last, depth)
        parts.append(re.escape(first[depth:shared]) + _branches(forms[begin:end], shared))
        begin = end
    return parts[0] if len(parts) == 1 else b"(?:" + b"|".join(parts) + b")"


def _shared_length(first: bytes, last: bytes, start: int) -> int:
    """Where ``first`` and ``last`` first differ from ``start`` on, or the shorter one
    ends: compared a span at a time, each span twice the last, so a run of bytes costs
    steps as many as the times its length doubles and work in proportion to it."""
    end = min(len(first), len(last))
    at, span = start, 64
    while at < end:
        stop = min(end, at + span)
        if first[at:stop] != last[at:stop]:
            differ = int.from_bytes(first[at:stop], "big") ^ int.from_bytes(last[at:stop], "big")
            # The bytes past the highest bit that differs are the same in both.
            return stop - (differ.bit_length() + 7) // 8
        at, span = stop, span * 2
    return end


class Spellings:
    """Some texts, compiled to be found in JSON bytes in any form an encoder writes."""

    __slots__ = ("_pattern",)

    def __init__(self, values: Iterable[str]) -> None:
        forms = {f for v in values if v for f in json_forms(v)}
        if not forms:
            raise ValueError("no text to find")
        self._pattern = re.compile(tree_pattern(forms))

    @classmethod
    def of(cls, values: Iterable[str]) -> Spellings | None:
        """``Spellings`` of ``values``; None when there is none to find."""
        texts = [v for v in values if v]
        return cls(texts) if texts else None

    def found_in(self, data: Raw | bytes) -> bool:
        """Whether JSON bytes ``data`` hold one of the texts, as an encoder writes it."""
        return self._pattern.search(data) is not None
