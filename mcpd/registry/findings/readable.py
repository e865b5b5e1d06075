"""What a model reads of each item a server lists, cleaned, and its texts for the rules.

A tool is read by its title, its description and its schemas (every property's
description and title, however deep), and by its annotations' title; a prompt by its
title, description and arguments; a resource or a template by its name, title and
description. What a host may show of each (icons, ``_meta``, a resource's MIME type
and annotations) is cleaned too, but not read by the rules. A JSON part (a schema,
icons) is passed on as its decoded value, not as the server's text
(``clean.clean_json``). ``read_*`` returns the item as it may be listed (the same
object when nothing needed cleaning), what was removed where, and the texts the rules
look at.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, Generic, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET, Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features

from ..pinning.definitions import Instructions, PinnedItem
from ..text.clean import clean_copy, clean_json, clean_text
from .glance import may_find, may_find_ascii
from .rules import HIDDEN_CHARACTERS, Finding, check

T = TypeVar("T", features.Resource, features.ResourceTemplate)
# An item a server lists; of a reading, the item as it may be listed (cleaned).
Item = TypeVar("Item", bound=PinnedItem | features.Resource)
Item_co = TypeVar("Item_co", bound=PinnedItem | features.Resource, covariant=True)
# A text field as a server may give it.
Text: TypeAlias = str | UnsetType | None
# What a field of an item may be changed to: a text, a schema, a decoded object (``_meta``,
# annotations), a prompt's arguments, or nothing (left off).
Change: TypeAlias = Text | Raw | dict[str, object] | list[features.PromptArgument]
_TEXT_KEYS: Final = frozenset({"description", "title"})
_EMPTY_OBJECT: Final = Raw(b'{"type":"object"}')
# A JSON string's escapes but ``\\uXXXX``, and the character each stands for.
_ESCAPES: Final = (
    (b"\\n", b"\n"),
    (b"\\t", b"\t"),
    (b"\\r", b"\r"),
    (b'\\"', b'"'),
    (b"\\/", b"/"),
    (b"\\b", b"\b"),
    (b"\\f", b"\f"),
)


class Readable(msgspec.Struct, Generic[Item_co], frozen=True):
    item: Item_co  # the item as it may be listed: cleaned
    removed: dict[str, int]  # where -> how many characters were taken out
    # (where, cleaned text) for the rules; a schema (cleaned) stands for its texts,
    # read from it only when a rule may find something in it.
    texts: list[tuple[str, str | Raw]]

    def all_texts(self) -> list[tuple[str, str]]:
        """Every text the rules look at, a schema's each on its own (``query.description``)."""
        out: list[tuple[str, str]] = []
        for where, text in self.texts:
            if isinstance(text, str):
                out.append((where, text))
                continue
            try:
                value = msgspec.json.decode(text)
            except (msgspec.DecodeError, RecursionError):
                continue  # too deep to read: it is not shown either
            out += [(f"{where}: {path}", sub) for path, sub in _texts_of(value)]
        return out

    def may_find(self) -> bool:
        """Whether a rule may find something: all the texts, schemas as the JSON they
        are (their keys and other strings too, which can only add to what is there),
        looked at once; as bytes while they are ASCII (most are)."""
        parts: list[bytes] = []
        for _, text in self.texts:
            if isinstance(text, str):
                if not text.isascii():
                    return self._may_find_text()
                parts.append(text.encode("ascii"))
                continue
            data = bytes(text)
            if not data.isascii() or b"\\u" in data:
                return self._may_find_text()
            parts.append(_unescaped(data) if b"\\" in data else data)
        return may_find_ascii(b"\t".join(parts))

    def _may_find_text(self) -> bool:
        parts: list[str] = []
        for _, text in self.texts:
            read = text if isinstance(text, str) else _json_text(text)
            if read is None:
                return True
            parts.append(read)
        return may_find("\t".join(parts))

    def findings(self, rules: bool = True, definition: bytes | None = None) -> list[Finding]:
        """What the cleaning and (``rules``) the rules found. ``definition``: the
        item's canonical JSON (``definitions``), which holds every text of it as the server
        sent it: when nothing was taken out in cleaning, a first look at it alone
        says whether the rules have anything to find."""
        out = []
        if self.removed:
            total = sum(self.removed.values())
            places = ", ".join(sorted(self.removed))
            out.append(
                Finding(
                    HIDDEN_CHARACTERS,
                    places,
                    f"{total} invisible or control character{'s' if total != 1 else ''} taken out",
                )
            )
        if not rules:
            return out
        if definition is not None and not self.removed:
            worth = _may_find_json(definition)
        else:
            worth = self.may_find()
        if worth:
            out += check(self.all_texts())
        return out


class _Reader:
    def __init__(self) -> None:
        self.removed: dict[str, int] = {}
        self.texts: list[tuple[str, str | Raw]] = []

    def text(self, where: str, value: Text, ruled: bool = True) -> Text:
        """A text cleaned; ``ruled``: one the rules look at."""
        if not isinstance(value, str):
            return value
        out, count = clean_text(value)
        self.took(where, count)
        if ruled:
            self.texts.append((where, out))
        return out

    def fields(self, *given: tuple[str, Text], ruled: bool = True) -> dict[str, Change]:
        """``text`` of each (field, value): the fields that cleaning changed, cleaned."""
        changes: dict[str, Change] = {}
        for field, value in given:
            out = self.text(field, value, ruled)
            if out is not value:
                changes[field] = out
        return changes

    def took(self, where: str, count: int) -> None:
        """``count`` characters taken out at ``where`` (one for a part left off whole)."""
        if count:
            self.removed[where] = self.removed.get(where, 0) + count

    def schema(self, where: str, raw: Raw, ruled: bool = True) -> Raw | None:
        """A JSON part (a schema) cleaned, as its decoded value (None: it could not be
        read, so it cannot be shown)."""
        cleaned, count = clean_json(raw)
        self.took(where, 1 if cleaned is None else count)
        if cleaned is None:
            return None
        if ruled:
            self.texts.append((where, cleaned))
        return cleaned

    def mapping(self, where: str, value: dict[str, object]) -> dict[str, object] | None:
        """A decoded object cleaned (None: too deep to write, so left off)."""
        cleaned, count = clean_copy(value)
        self.took(where, 1 if cleaned is None else count)
        return cleaned

    def parts(
        self, changes: dict[str, Change], *given: tuple[str, str, Raw | mcp.Meta | UnsetType | None]
    ) -> None:
        """Optional JSON fields (field, where, value) a host may show but the rules do
        not read (icons, ``_meta``...), cleaned into ``changes`` where that changed
        them, left off where they could not be read."""
        for field, where, value in given:
            out: Change = value
            if isinstance(value, Raw):
                out = self.schema(where, value, ruled=False)
            elif isinstance(value, dict):
                out = self.mapping(where, value)
            if out is not value:
                changes[field] = UNSET if out is None else out

    def done(self, item: Item, changes: dict[str, Change]) -> Readable[Item]:
        """The reading of ``item``, with ``changes`` made to it."""
        item = msgspec.structs.replace(item, **changes) if changes else item
        return Readable(item, self.removed, self.texts)


def read_tool(tool: mcp.Tool) -> Readable[mcp.Tool]:
    r = _Reader()
    changes = r.fields(("title", tool.title), ("description", tool.description))
    schema = r.schema("inputSchema", tool.inputSchema)
    if schema is not tool.inputSchema:
        changes["inputSchema"] = _EMPTY_OBJECT if schema is None else schema
    if isinstance(tool.outputSchema, Raw):
        out_schema = r.schema("outputSchema", tool.outputSchema)
        if out_schema is not tool.outputSchema:
            changes["outputSchema"] = UNSET if out_schema is None else out_schema
    if isinstance(tool.annotations, dict):
        annotations = r.mapping("annotations", tool.annotations)
        if annotations is not tool.annotations:
            changes["annotations"] = UNSET if annotations is None else annotations
        title = None if annotations is None else annotations.get("title")
        if isinstance(title, str):
            r.texts.append(("annotations.title", title))
    r.parts(
        changes,
        ("icons", "icons", tool.icons),
        ("execution", "execution", tool.execution),
        ("meta", "_meta", tool.meta),
    )
    return r.done(tool, changes)


def read_prompt(prompt: features.Prompt) -> Readable[features.Prompt]:
    r = _Reader()
    changes = r.fields(("title", prompt.title), ("description", prompt.description))
    if isinstance(prompt.arguments, list):
        arguments = []
        changed = False
        for arg in prompt.arguments:
            where = f"argument {arg.name}"
            given = {"name": arg.name, "title": arg.title, "description": arg.description}
            parts = {f: r.text(f"{where} {f}", v) for f, v in given.items()}
            if any(parts[f] is not given[f] for f in parts):
                arg = msgspec.structs.replace(arg, **parts)
                changed = True
            arguments.append(arg)
        if changed:
            changes["arguments"] = arguments
    r.parts(changes, ("icons", "icons", prompt.icons), ("meta", "_meta", prompt.meta))
    return r.done(prompt, changes)


def read_listed(item: T) -> Readable[T]:
    """A resource or a template: its name, title and description, and what a host
    may show of it (its MIME type, annotations, icons and ``_meta``). Its URI is how it
    is read: it is left as it is (one that needs cleaning is not listed at all)."""
    r = _Reader()
    changes = r.fields(
        ("name", item.name), ("title", item.title), ("description", item.description)
    )
    changes.update(r.fields(("mimeType", item.mimeType), ruled=False))
    r.parts(
        changes,
        ("annotations", "annotations", item.annotations),
        ("icons", "icons", item.icons),
        ("meta", "_meta", item.meta),
    )
    return r.done(item, changes)


def read_instructions(given: Instructions) -> Readable[Instructions]:
    """A server's instructions: one text, cleaned (the item itself when it was clean)."""
    out, removed = clean_text(given.instructions)
    item = given if out == given.instructions else Instructions(out)
    return Readable(item, {"instructions": removed} if removed else {}, [("instructions", out)])


def _texts_of(value: rpc.Json) -> Iterator[tuple[str, str]]:
    """``(path, text)`` for every description and title in a schema, however deep,
    without recursion; the path names the properties on the way (``query.description``)."""
    stack: list[tuple[rpc.Json, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            for key, sub in item.items():
                if key in _TEXT_KEYS and isinstance(sub, str):
                    yield (f"{path}.{key}" if path else key), sub
                elif isinstance(sub, dict | list):
                    step = "" if key in ("properties", "items", "$defs", "definitions") else key
                    stack.append((sub, f"{path}.{step}".strip(".") if step else path))
        elif isinstance(item, list):
            stack.extend((sub, path) for sub in item if isinstance(sub, dict | list))


def _may_find_json(data: bytes) -> bool:
    """``may_find`` for the texts of a JSON document (strings, keys and all)."""
    if data.isascii() and b"\\u" not in data:
        return may_find_ascii(_unescaped(data))
    text = _json_text(Raw(data))
    return text is None or may_find(text)


def _json_text(raw: Raw) -> str | None:
    """A JSON document as text in which every string reads as it holds (its escapes
    read), so that its words and characters are where they are in the decoded strings;
    None when that takes decoding (an escape that may stand for a letter)."""
    data = bytes(raw)
    if b"\\u" in data:
        # Written again, the document escapes only what is no letter (controls).
        try:
            data = msgspec.json.encode(msgspec.json.decode(raw))
        except (msgspec.DecodeError, msgspec.EncodeError, RecursionError, UnicodeError):
            return None
        if b"\\u" in data:
            return None
    return _unescaped(data).decode("utf-8", "replace")


def _unescaped(data: bytes) -> bytes:
    """JSON text with no ``\\u`` escape, every other escape read."""
    if b"\\" not in data:
        return data
    # A backslash escaped is set aside first: what is left of each escape is one
    # backslash and the letter after it.
    data = data.replace(b"\\\\", b"\x00")
    for escape, char in _ESCAPES:
        data = data.replace(escape, char)
    return data.replace(b"\x00", b"\\")
