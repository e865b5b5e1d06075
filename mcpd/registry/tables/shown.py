"""What agents are shown of a server's tool, prompt, resource or template: its local
name, its server in front of its description and title (and of every later line of a
description that begins with a bracket, ``marking``), titles and names on one line,
the state's marker (an outage, a hold) before that, mcpd's own keys in ``_meta``, and
for a server not marked trusted, the cautious value of every annotation hint.
``Entry`` is a tool as the table holds it: what agents see of it, and the way back to
its server."""

from __future__ import annotations

from typing import Any, Final, TypeVar

import msgspec
from msgspec import UNSET

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.shown.visible import visible

from ..text.marking import breaks_as_spaces, later_lines_marked, lines_marked

T = TypeVar("T")
_encode: Final = msgspec.json.Encoder().encode


class Entry(rpc.Late):
    """One tool as agents see it, with the way back to its server."""

    __slots__ = (
        "_flags",
        "alias",
        "available",
        "held",
        "local",
        "name",
        "original",
        "other_names",
        "tool",
    )

    def __init__(
        self,
        local: str,
        alias: str,
        original: str,
        tool: mcp.Tool,
        name: str | None = None,
        other_names: tuple[str, ...] = (),
    ) -> None:
        self.local = local
        self.alias = alias
        self.original = original
        # The name after curation (a rename): what templates and profile patterns see.
        self.name = original if name is None else name
        # The tool's local names other than ``local`` that a policy rule is written
        # against: under the daemon's own naming and the default profile's, and each
        # name as it was before a hash was added. A rule holds for the tool by any of
        # them, whichever profile lists it and whatever else its server lists.
        self.other_names = other_names
        self.tool = tool
        self.available = True
        # Why the tool is held (``gate``), in words for a model; None: it is not.
        self.held: str | None = None
        self._flags: tuple[bool, str | None] = (False, None)  # (trusted, marker)

    def reencode(self, trusted: bool, marker: str | None) -> None:
        """The tool as agents see it changed (availability, marker)."""
        self.reflag((trusted, marker))

    def reflag(self, flags: tuple[bool, str | None]) -> None:
        """As ``reencode``, with a ``(trusted, marker)`` tuple the caller may share
        between all of one server's tools, rather than one tuple for each."""
        self._flags = flags

    @property
    def look(self) -> object:
        """A new object whenever what agents see of the tool changed."""
        return self._flags

    def same_as(self, other: Entry) -> bool:
        """Whether ``other`` is this tool as agents see it, under the same names. The
        table then keeps this one: a profile takes a new entry for news of a change."""
        return (
            self.local == other.local
            and self.other_names == other.other_names
            and (self.alias, self.original, self.name) == (other.alias, other.original, other.name)
            and (self.available, self.held, self._flags)
            == (other.available, other.held, other._flags)
            # Encoded, as ``==`` takes a hint's ``1`` for its ``true``.
            and (self.tool is other.tool or _encode(self.tool) == _encode(other.tool))
        )

    def renamed(self, local: str, other_names: tuple[str, ...] = ()) -> Entry:
        """The same tool, as it is now, under another local name (a profile's)."""
        entry = Entry(local, self.alias, self.original, self.tool, self.name, other_names)
        entry.available, entry.held, entry._flags = self.available, self.held, self._flags
        return entry

    def wire(self) -> mcp.Tool:
        """The tool as a listing shows it to agents. Built as it is written (an entry in a
        listing is encoded through ``rpc``'s late values), never kept: an encoding
        kept beside every decoded tool would double what each tool costs in memory for
        as long as it is listed, while making one as it is written is cheap beside the
        write itself."""
        return agent_tool(self, *self._flags)


def lined_tools(alias: str, tools: dict[str, mcp.Tool]) -> dict[str, mcp.Tool]:
    """``tools`` with their descriptions' later lines marked as agents see them: done
    once for each definition, as the table takes it, not at every listing (a listing
    builds each tool anew). The same dict when no description needs it."""
    out: dict[str, mcp.Tool] | None = None
    for name, tool in tools.items():
        given = tool.description
        if not isinstance(given, str):
            continue
        lined = later_lines_marked(alias, given)
        if lined is not given:
            if out is None:
                out = dict(tools)
            out[name] = msgspec.structs.replace(tool, description=lined)
    return tools if out is None else out


def _note(alias: str, description: object, marker: str | None) -> str:
    """The source in front of a description, and the state's marker before that."""
    note = f"[{alias}] {description if isinstance(description, str) else ''}".rstrip()
    return f"[{marker}] {note}" if marker else note


def sourced(
    alias: str,
    original: str,
    available: bool,
    description: object,
    meta: object,
    marker: str | None,
) -> tuple[str, mcp.Meta]:
    """The description and ``_meta`` agents see for a server's tool or prompt: the
    source in front, the state's marker before that, and mcpd's keys in ``_meta``.
    ``description``'s later lines are marked already (``lined_tools``, ``described``)."""
    note = _note(alias, description, marker)
    # Keys under mcpd/ are ours: a server cannot plant them to look vouched for.
    out: mcp.Meta = (
        {k: v for k, v in meta.items() if not k.startswith("mcpd/")}
        if isinstance(meta, dict)
        else {}
    )
    out["mcpd/server"] = alias
    # Under mcpd's key, in mcpd's words: the server's name as a person reads it, its
    # line breaks, escapes and bidi controls written out (calls go by the local name).
    out["mcpd/originalName"] = visible(original)
    out["mcpd/available"] = available
    return note, out


def described(alias: str, description: T) -> T | str:
    """A description of the server's with every later line that begins with a
    bracket marked (its first line gets the mark in front as it is shown)."""
    return later_lines_marked(alias, description) if isinstance(description, str) else description


def _shown_listed(
    alias: str,
    r: features.Resource | features.ResourceTemplate,
    original: str,
    shown: str,
    key: str,
    available: bool,
    marker: str | None,
    held: str | None,
) -> dict[str, Any]:
    """What agents see of a resource or template listed under ``shown`` (the server's
    ``original`` kept under ``key`` in ``_meta`` when they differ); a held one is marked
    unavailable, saying why."""
    if held is not None:
        available, marker = False, f"held: {held}"
    own = r.meta
    meta: dict[str, Any] = (
        {k: v for k, v in own.items() if not k.startswith("mcpd/")} if isinstance(own, dict) else {}
    )
    meta["mcpd/server"] = alias
    if shown != original:
        meta[key] = original
    meta["mcpd/available"] = available
    if held is not None:
        meta["mcpd/held"] = held
    return {
        "name": breaks_as_spaces(r.name) if isinstance(r.name, str) else r.name,
        "title": marked_title(alias, r.title),
        "description": later_lines_marked(alias, _note(alias, r.description, marker)),
        "meta": meta,
    }


def agent_resource(
    alias: str,
    r: features.Resource,
    uri: str,
    available: bool,
    marker: str | None,
    held: str | None = None,
) -> features.Resource:
    """A resource as agents see it under ``uri`` (the server's, or its mcpd:// form)."""
    shown = _shown_listed(alias, r, r.uri, uri, "mcpd/originalUri", available, marker, held)
    return msgspec.structs.replace(r, uri=uri, **shown)


def agent_template(
    alias: str,
    r: features.ResourceTemplate,
    template: str,
    available: bool,
    marker: str | None,
    held: str | None,
) -> features.ResourceTemplate:
    """A resource template as agents see it as ``template``."""
    key = "mcpd/originalUriTemplate"
    shown = _shown_listed(alias, r, r.uriTemplate, template, key, available, marker, held)
    return msgspec.structs.replace(r, uriTemplate=template, **shown)


def marked_title(alias: str, title: T) -> T | str:
    """A title as agents see it: its server in front, as in descriptions, on one line."""
    return f"[{alias}] {breaks_as_spaces(title)}" if isinstance(title, str) else title


def argument_text(alias: str, text: T) -> T | str:
    """A prompt argument's title or description: it has no mark in front, so each of
    its lines that begins with a bracket gets one."""
    return lines_marked(alias, text) if isinstance(text, str) else text


def agent_tool(entry: Entry, trusted: bool, marker: str | None) -> mcp.Tool:
    """The tool as agents see it: local name, source noted, annotations not believed."""
    t = entry.tool
    note, meta = sourced(
        entry.alias, entry.original, entry.available, t.description, t.meta, marker
    )
    if entry.held is not None:
        meta["mcpd/held"] = entry.held
    annotations = t.annotations if isinstance(t.annotations, dict) else None
    if annotations is not None and isinstance(annotations.get("title"), str):
        # Marked wherever it is shown, under mcpd's own key too: the server's words.
        annotations = {**annotations, "title": marked_title(entry.alias, annotations["title"])}
    if not trusted:
        if annotations is not None:
            meta["mcpd/upstreamAnnotations"] = annotations
        # The cautious value of every hint, whatever the server claimed.
        annotations = dict(annotations or {})
        annotations["readOnlyHint"] = False
        annotations["destructiveHint"] = True
        annotations["idempotentHint"] = False
        annotations["openWorldHint"] = True
    return mcp.Tool(
        name=entry.local,
        title=marked_title(entry.alias, t.title),
        description=note,
        inputSchema=t.inputSchema,
        outputSchema=t.outputSchema,
        annotations=annotations if annotations is not None else UNSET,
        icons=t.icons,
        execution=t.execution,
        meta=meta,
    )
