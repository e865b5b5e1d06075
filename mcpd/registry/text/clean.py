"""Server text made fit for a model to read: invisible and control characters taken out.

A server's descriptions, titles, schemas, instructions and error texts go into a
model's context, and a person reviewing them sees only what a terminal or a UI draws.
Characters that draw nothing can carry words only the model reads (Unicode tag
characters spell ASCII invisibly; variation selectors carry bytes after an emoji),
bidirectional controls reorder what a person sees, and terminal escapes erase or
recolour it. So before anything of a server's is listed, these are taken out:

- terminal escape sequences, whole (CSI, OSC and the other string sequences, in
  their 7-bit and 8-bit forms), not just their ESC;
- control characters (Cc) but tab and the line feed; the other line breaks (CR,
  VT, FF, NEL, the separators) become line feeds, so every line is a ``\\n`` line;
- format characters (Cf: zero-width characters, bidi controls, tags, the BOM),
  surrogates, the whole tag block, the variation selectors a text needs none of
  (all but the emoji and text presentation selectors, and those only one at a time),
  and a few letters that are blank by design (Hangul fillers, the grapheme joiner).

A JSON part of an item (a schema, icons, ``_meta``) is passed on as its decoded value
written again, so that agents are handed the value pinned and shown, never a key given
twice; a key that cleans to another key of its object is left out, not let take its
place. Everything runs in time linear in the text: the patterns are single character
classes, or (for escape sequences) made of possessive quantifiers over disjoint
classes, so none of them ever goes back over what it has read.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Final

import msgspec
from msgspec import Raw

from protocol.shown.visible import char_class

_encode: Final = msgspec.json.Encoder().encode
_HIDDEN_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_LINE_BREAKS: Final = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
# Blank letters and marks: they draw nothing, whatever their category says.
_BLANK: Final = (0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F)
_BLANK_TOO: Final = (0x3164, 0xFFA0)
_PRESENTATION: Final = "\ufe0e\ufe0f"  # text and emoji presentation: kept, one at a time
# Terminal escape sequences, whole. Every quantifier is possessive and every class
# is disjoint from what follows it, so no match ever goes back: a CSI's parameters,
# intermediates and final byte; a string sequence (DCS, SOS, OSC, PM, APC) up to its
# BEL or ST, or only its introducer when another escape comes first or none ends it
# (so a scan for a terminator never runs past the next introducer); any other escape
# with its intermediates and final character.
_ESCAPES: Final = re.compile(
    "(?:\x1b\\[|\x9b)[0-?]*+[ -/]*+[@-~]?"
    "|(?:\x1b[PX\\]^_]|[\x90\x98\x9d\x9e\x9f])"
    "(?:[^\x07\x1b\x90\x98\x9c\x9d\x9e\x9f]*+(?:\x07|\x1b\\\\|\x9c))?"
    "|\x1b[ -/]*+[0-~]?"
)


def _hidden_code_points() -> list[int]:
    """Every code point to drop (line breaks aside), in order."""
    drop: set[int] = set()
    category = unicodedata.category
    # Format, control and surrogate code points live in these planes only (plane 14
    # holds the tags and the variation selectors supplement).
    for span in (range(0x20000), range(0xE0000, 0xE1000)):
        drop.update(code for code in span if category(chr(code)) in _HIDDEN_CATEGORIES)
    drop.update(range(0xE0000, 0xE0080))
    drop.update((*range(0xFE00, 0xFE0E), *range(0xE0100, 0xE01F0), *_BLANK, *_BLANK_TOO))
    drop.difference_update(ord(ch) for ch in "\n\t" + _LINE_BREAKS)
    return sorted(drop)


_DROP: Final = char_class(_hidden_code_points())
_BREAK: Final = char_class(sorted(ord(ch) for ch in _LINE_BREAKS))
_INTRODUCER: Final = char_class([0x1B, 0x90, 0x98, 0x9B, 0x9D, 0x9E, 0x9F])
_SELECTOR: Final = char_class([ord(ch) for ch in _PRESENTATION])
# A presentation selector at the start or right after another one carries only bits.
_SELECTOR_RUN: Final = re.compile(f"(?:^|(?<=[{_PRESENTATION}]))[{_PRESENTATION}]++")


def clean_text(text: str) -> tuple[str, int]:
    """``text`` without what hides or acts on a terminal, and how many characters went
    (or became line feeds). A Windows line end is a line end, not a removal."""
    if text.isascii() and _plain_ascii(text):
        return text, 0
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    removed = 0
    if _INTRODUCER.search(text) is not None:
        before = len(text)
        text = _ESCAPES.sub("", text)
        removed = before - len(text)
    text, breaks = _BREAK.subn("\n", text)
    text, dropped = _DROP.subn("", text)
    removed += breaks + dropped
    if _SELECTOR.search(text) is not None:
        before = len(text)
        text = _SELECTOR_RUN.sub("", text)
        removed += before - len(text)
    return text, removed


def _plain_ascii(text: str) -> bool:
    """ASCII with no control character but tab and line feed (the common case)."""
    if text.isprintable():
        return True
    return text.replace("\n", "").replace("\t", "").isprintable()


def clean_value(value: object) -> tuple[object, int]:
    """Every string in a JSON value (keys too) cleaned, in place: the value must be
    the caller's own (freshly decoded). Walked with a stack of its own: a deep schema
    is not a deep recursion."""
    if isinstance(value, str):
        return clean_text(value)
    if not isinstance(value, dict | list):
        return value, 0
    removed = 0
    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        holder, key = stack.pop()
        item = holder[key]
        if isinstance(item, str):
            text, count = clean_text(item)
            if count:
                holder[key] = text
                removed += count
        elif isinstance(item, list):
            stack.extend((item, i) for i in range(len(item)))
        elif isinstance(item, dict):
            removed += _clean_keys(item)
            stack.extend((item, k) for k in item)
    return root[0], removed


def clean_copy(value: dict[str, object]) -> tuple[dict[str, object] | None, int]:
    """A decoded object that is not the caller's own (a field of a server's item),
    every string in it cleaned: the same object when nothing needed it, a cleaned copy
    when something did; None when it is nested too deep to write, so it cannot be shown."""
    try:
        encoded = _encode(value)
        if not _maybe_hidden(encoded):
            return value, 0
        copy = msgspec.json.decode(encoded, type=dict[str, object])
        _, removed = clean_value(copy)  # an object is cleaned in place
    except (msgspec.DecodeError, RecursionError):
        return None, 0
    return (copy, removed) if removed else (value, 0)


def _clean_keys(obj: dict[str, Any]) -> int:
    """An object's keys cleaned. A key that cleans to a key the object already has, or
    to the same key as another, is left out with its value: a person reading the
    definition sees two keys, so the model must not get the hidden one's value under
    the plain one's name."""
    renamed: dict[str, list[tuple[str, int]]] = {}
    for key in [k for k in obj if not (k.isascii() and _plain_ascii(k))]:
        text, count = clean_text(key)
        if count:
            renamed.setdefault(text, []).append((key, count))
    removed = 0
    for text, keys in renamed.items():
        # A cleaned key needs no more cleaning: it is in ``obj`` only as a key kept.
        if len(keys) == 1 and text not in obj:
            key, count = keys[0]
            obj[text] = obj.pop(key)
            removed += count
            continue
        for key, count in keys:
            del obj[key]
            removed += count
    return removed


def _maybe_hidden(data: bytes) -> bool:
    """Whether JSON text may hold something to clean: a non-ASCII byte, DEL (which
    JSON lets a string hold as it is), or an escape other than ``\\n``, ``\\t``,
    ``\\"``, ``\\\\`` and ``\\/`` (every other control character in a string is an
    escape: JSON allows no other; a false alarm only costs a walk)."""
    if not data.isascii() or b"\x7f" in data:
        return True
    if b"\\" not in data:  # no escape at all: one pass, not four
        return False
    return b"\\u" in data or b"\\r" in data or b"\\b" in data or b"\\f" in data


def clean_data(raw: Raw) -> Raw | None:
    """JSON data passed on as it came where nothing in it may need cleaning (most),
    else ``clean_json``'s."""
    if not _maybe_hidden(bytes(raw)):
        return raw
    return clean_json(raw)[0]


def clean_json(raw: Raw) -> tuple[Raw | None, int]:
    """A JSON document (a schema) as its decoded value, every string in it cleaned.

    What is passed on is the value written again, not the server's text: where an
    object gives a key twice, the value a decoder keeps is the one pins are of and a
    person is shown, and the text would hand a model the other one too. The same
    ``raw`` when its bytes are that writing already (as most servers write JSON). A
    document nested too deep to decode is pinned as its text: it is passed on as that
    text when nothing in it may need cleaning; otherwise it cannot be shown (None)."""
    try:
        value = msgspec.json.decode(raw)
        encoded = _encode(value)
    except (msgspec.DecodeError, RecursionError):
        return (None if _maybe_hidden(bytes(raw)) else raw), 0
    removed = 0
    if _maybe_hidden(encoded):
        value, removed = clean_value(value)
        if removed:
            encoded = _encode(value)
    if memoryview(raw) == encoded:
        return raw, removed
    return Raw(encoded), removed
