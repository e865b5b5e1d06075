"""Pins: the definition of each item a model reads, as it was approved, by digest.

For each server (by alias), its instructions (one item, named "") and each of its
tools, prompts and resource templates, the pin holds the canonical form of every
field of it agents are handed (name, title, description, schemas with every
description in them, annotations, icons, ``_meta``, a tool's execution; a prompt's
arguments; a template's URI template, name and MIME type; the instructions' text)
and its SHA-256: a host acts on a field a model never reads (it renders the UI
resource ``_meta`` names, it trusts a read-only hint), so a change to any of them
is a change. The canonical form is JSON with every object's keys sorted and nothing else changed, so
a server that reorders its schema's keys has not changed its tool; one invisible
character more has. The digest is of what the server sent, before cleaning: a
change a person cannot see is still a change, and ``mcpd approve`` shows it escaped.
It is of what the server sent as it decodes: of a key an object gives twice, the last
value, which is also the only one agents are handed (``clean.clean_json``).

A pin set (``PinSet``) is what ``pins.json`` in the state directory holds, and what
``mcpd pins export`` writes for a team to commit beside the config: the definitions
themselves, so that a diff can be shown on any machine, and a digest to check each
against (of an item its server no longer lists, the digest alone: ``BARE``). What the
daemon keeps in memory of them is in ``digests``.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final, Literal, TypeAlias

import msgspec
from msgspec import UNSET, Raw

from protocol.mcp import core as mcp
from protocol.mcp import features

Kind = Literal["tool", "prompt", "template", "instructions"]
KINDS: Final[tuple[Kind, ...]] = ("tool", "prompt", "template", "instructions")


class Instructions(msgspec.Struct, forbid_unknown_fields=True):
    """A server's instructions as an item to pin: their text is their definition."""

    instructions: str


# The name a server's instructions are pinned and held by: a server has one text.
INSTRUCTIONS: Final = ""
PinnedItem: TypeAlias = mcp.Tool | features.Prompt | features.ResourceTemplate | Instructions
FORMAT: Final = 2
# Pins of format 1 left out icons, ``_meta`` and a tool's execution: such a pin still
# stands for an item that differs from it in those alone (``former``), once.
FORMATS: Final = (1, FORMAT)
_PREFIX: Final = "sha256:"
_DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}")
_canonical: Final = msgspec.json.Encoder(order="sorted")


class PinRecord(msgspec.Struct, forbid_unknown_fields=True):
    """One pinned item as a pin file holds it."""

    digest: str  # "sha256:" and the hex digest of ``definition``
    # Canonical JSON; ``null`` (``BARE``): the pin is kept by its digest alone, as the
    # pin of an item its server no longer lists is (a change of it is known, not shown).
    definition: Raw
    # A person approved it (``mcpd approve``, an import), not just mcpd at first sight:
    # findings no longer hold it.
    reviewed: bool = False


BARE: Final = b"null"  # the definition of a pin kept by its digest alone


def bare(record: PinRecord) -> bool:
    return bytes(record.definition) == BARE


class PinnedServer(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    # The server as a whole is approved: listed once without being held whole, or
    # approved whole by a person. Until then its items are pinned as they are first
    # seen (or, with hold_new_servers, held).
    approved: bool = False
    tools: dict[str, PinRecord] = msgspec.field(default_factory=dict)
    prompts: dict[str, PinRecord] = msgspec.field(default_factory=dict)
    templates: dict[str, PinRecord] = msgspec.field(default_factory=dict)
    # At most one, named INSTRUCTIONS; a file without it is one of a server whose
    # instructions were never pinned.
    instructions: dict[str, PinRecord] = msgspec.field(default_factory=dict)
    # Of each list, the marks of the names whose pins were forgotten (``forgotten``),
    # in base64: the daemon's own record, which an export leaves out.
    forgotten: dict[Kind, str] = msgspec.field(default_factory=dict)

    def of(self, kind: Kind) -> dict[str, PinRecord]:
        if kind == "tool":
            return self.tools
        if kind == "prompt":
            return self.prompts
        if kind == "instructions":
            return self.instructions
        return self.templates


class PinSet(msgspec.Struct, forbid_unknown_fields=True):
    format: int = FORMAT
    servers: dict[str, PinnedServer] = msgspec.field(default_factory=dict)


class BadPins(Exception):
    """A pin file or an import that cannot be used, with what is wrong with it."""


def key_of(item: PinnedItem) -> str:
    """How an item is known within its server: a template by its URI template."""
    if isinstance(item, features.ResourceTemplate):
        return item.uriTemplate
    if isinstance(item, Instructions):
        return INSTRUCTIONS
    return item.name


class _ToolDefinition(msgspec.Struct, omit_defaults=True):
    """What a model reads of a tool, as its definition is encoded: its fields in
    sorted order (the encoder's), those unset or None left out (as ``_present``
    leaves them out of the other kinds' definitions)."""

    name: str
    title: Any = None
    description: Any = None
    inputSchema: Any = None
    outputSchema: Any = None
    annotations: Any = None
    icons: Any = None
    execution: Any = None
    meta: Any = msgspec.field(name="_meta", default=None)


def definition(item: PinnedItem, former: bool = False) -> bytes:
    """The canonical JSON of what agents are handed of ``item``; ``former``: as pins of
    format 1 had it (without icons, ``_meta`` and execution)."""
    out: dict[str, Any]
    if isinstance(item, Instructions):
        return _canonical.encode(item)
    extra: dict[str, Any] = {}
    if not former:
        extra = {"icons": _json(item.icons), "_meta": item.meta}
    if isinstance(item, mcp.Tool):
        return _canonical.encode(
            _ToolDefinition(
                item.name,
                item.title,
                item.description,
                _json(item.inputSchema),
                _json(item.outputSchema),
                item.annotations,
                extra.get("icons"),
                None if former else _json(item.execution),
                extra.get("_meta"),
            )
        )
    if isinstance(item, features.Prompt):
        arguments = None
        if isinstance(item.arguments, list):
            arguments = [_argument(a) for a in item.arguments]
        out = {
            "name": item.name,
            "title": item.title,
            "description": item.description,
            "arguments": arguments,
        }
    else:
        out = {
            "uriTemplate": item.uriTemplate,
            "name": item.name,
            "title": item.title,
            "description": item.description,
            "mimeType": item.mimeType,
        }
        if not former:
            extra["annotations"] = _json(item.annotations)
    return _canonical.encode(_present({**out, **extra}))


def has_later_fields(item: PinnedItem) -> bool:
    """Whether ``item`` has a field pins of format 1 left out."""
    if isinstance(item, Instructions):
        return False  # format 1 did not pin them at all
    later = [item.icons, item.meta]
    if isinstance(item, mcp.Tool):
        later.append(item.execution)
    elif isinstance(item, features.ResourceTemplate):
        later.append(item.annotations)
    return any(v is not None and v is not UNSET for v in later)


def pin_digest(data: bytes) -> str:
    """The digest of a definition as pin files and people see it."""
    return _PREFIX + hashlib.sha256(data).hexdigest()


def record_of(item: PinnedItem) -> PinRecord:
    data = definition(item)
    return PinRecord(pin_digest(data), Raw(data))


_TYPES: Final[dict[Kind, type[Any]]] = {
    "tool": mcp.Tool,
    "prompt": features.Prompt,
    "template": features.ResourceTemplate,
    "instructions": Instructions,
}


def item_of(kind: Kind, data: Raw | bytes) -> PinnedItem:
    """A definition as an item that can be listed."""
    item: PinnedItem = msgspec.json.decode(data, type=_TYPES[kind])
    return item


def canonical(raw: Raw) -> bytes:
    """A definition read from a file, in canonical form again (the file may be
    indented, or its keys in another order)."""
    return _canonical.encode(msgspec.json.decode(raw))


def checked(pins: PinSet, source: str) -> PinSet:
    """``pins`` with every definition canonical and matching its digest; ``BadPins``
    naming the first that does not."""
    if pins.format not in FORMATS:
        raise BadPins(f"{source}: pin format {pins.format}, expected {FORMAT}")
    for alias, server in pins.servers.items():
        for kind in KINDS:
            items = server.of(kind)
            for key, pin in items.items():
                if kind == "instructions" and key != INSTRUCTIONS:
                    raise BadPins(f'{source}: {alias} instructions: named {key!r}, not ""')
                if bare(pin):
                    if not _DIGEST.fullmatch(pin.digest):
                        raise BadPins(f"{source}: {alias} {kind} {key!r}: not a digest")
                    continue
                try:
                    data = canonical(pin.definition)
                    msgspec.json.decode(data, type=_TYPES[kind])
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    raise BadPins(f"{source}: {alias} {kind} {key!r}: {exc}") from None
                if pin_digest(data) != pin.digest:
                    raise BadPins(
                        f"{source}: {alias} {kind} {key!r}: the digest does not match "
                        "the definition"
                    )
                items[key] = PinRecord(pin.digest, Raw(data), pin.reviewed)
    return pins


def verified(record: PinRecord, expected: bytes) -> Raw | None:
    """The definition of a record read back from a pin file, canonical, if it is the
    one of the digest ``expected``; None if not. A definition as mcpd writes it is
    canonical already, and is only hashed; another (indented, its keys in another
    order) is made canonical first."""
    if bare(record):
        return None
    if hashlib.sha256(record.definition).digest() == expected:
        return record.definition
    try:
        data = canonical(record.definition)
    except msgspec.DecodeError:
        return None
    return Raw(data) if hashlib.sha256(data).digest() == expected else None


def _argument(arg: features.PromptArgument) -> dict[str, Any]:
    fields = {"name": arg.name, "title": arg.title, "description": arg.description}
    return _present({**fields, "required": arg.required})


def _json(raw: Raw | Any) -> Any:
    if not isinstance(raw, Raw):
        return raw
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        # Too deep to read: its bytes stand for it (any change is still one).
        return {"mcpd/unreadable": bytes(raw).decode("utf-8", "replace")}


def _present(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None and v is not UNSET}
