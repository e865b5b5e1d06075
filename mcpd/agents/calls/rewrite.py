"""URIs inside what servers return, rewritten so an agent can read what it is handed.

A tool result or a prompt message may carry resource links and embedded resources;
a read returns contents, each with its URI. Each such URI is replaced by the one
the agent can read it back with (``registry.uris.resource_routes``: usually the same
URI). A result whose URIs are all unchanged passes through as the server's own bytes.

A read's text counts against the result budget like a tool result's text; binary
contents (``blob``) are passed through untouched.

What of a definition rides along is cleaned as a listing's is (``registry.text.clean``): a
prompt's description is the one pinned for it, marked with its server as listed, and
the MIME types of contents and the names, titles and descriptions of the resources a
prompt's messages carry are cleaned. A resource's name and title, in a prompt's
messages or a tool's result, are one line each (``registry.text.marking``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec import Raw

from protocol.jsonrpc import messages as rpc

from ...registry.text.clean import clean_text
from ...registry.text.marking import as_listed, breaks_as_spaces
from .results import content_apart

ToAgent = Callable[[str], str]  # a server's URI -> the agent's
_MARKERS: Final = (b'"resource_link"', b'"resource"')
# What a resource a prompt's message carries says of itself, cleaned as if listed.
_DEFINING: Final = ("name", "title", "description", "mimeType")
# What a host shows as a link's label: one line.
_ONE_LINE: Final = frozenset({"name", "title"})


class _Described(msgspec.Struct):
    description: object = None


_described: Final = msgspec.json.Decoder(_Described)


def _cleaned(item: dict[str, Any], keys: tuple[str, ...]) -> bool:
    """Clean the strings under ``keys`` of ``item`` in place, the one-line ones made
    one line (those alone when ``keys`` is empty); whether one changed."""
    changed = False
    for key in keys or _ONE_LINE:
        value = item.get(key)
        if isinstance(value, str):
            clean = clean_text(value)[0] if keys else value
            if key in _ONE_LINE:
                clean = breaks_as_spaces(clean)
            if clean != value:
                item[key], changed = clean, True
    return changed


def _block(block: Any, to_agent: ToAgent, defining: tuple[str, ...] = ()) -> bool:
    """Rewrite one content block in place (its resource's ``defining`` strings cleaned
    too); whether it changed."""
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    if kind == "resource_link" and isinstance(block.get("uri"), str):
        changed = _cleaned(block, defining)
        new = to_agent(block["uri"])
        if new != block["uri"]:
            block["uri"] = new
            return True
        return changed
    if kind == "resource" and isinstance(block.get("resource"), dict):
        inner = dict(block["resource"])
        changed = _cleaned(inner, defining)
        if isinstance(inner.get("uri"), str):
            new = to_agent(inner["uri"])
            if new != inner["uri"]:
                inner["uri"], changed = new, True
        if changed:
            block["resource"] = inner
        return changed
    return False


def _blocks(value: Any, to_agent: ToAgent, defining: tuple[str, ...] = ()) -> bool:
    if isinstance(value, list):
        changed = False
        for block in value:
            changed = _block(block, to_agent, defining) or changed
        return changed
    return _block(value, to_agent, defining)


def tool_result(result: Raw | dict[str, object], to_agent: ToAgent) -> Raw | dict[str, object]:
    """A tools/call result (or a task's), its content's URIs rewritten; its other
    members as they came. Raises msgspec.DecodeError for a content that cannot be read
    (a number no double holds)."""
    if isinstance(result, Raw):
        data = bytes(result)
        if not any(m in data for m in _MARKERS):
            return result
        if not data.lstrip().startswith(b"{"):
            return result  # not an object: no content to rewrite
        decoded = content_apart(result)
        if not _blocks(decoded.get("content"), to_agent):
            return result
        return decoded
    _blocks(result.get("content"), to_agent)
    return result


def prompt_result(
    result: Raw, to_agent: ToAgent, alias: str, pinned: str | None = None
) -> Raw | rpc.JsonObject:
    """A prompts/get result, its messages' URIs rewritten and what their resources say
    of themselves cleaned; its description ``pinned`` (the prompt's as listed, cleaned),
    or the server's cleaned when the prompt has none, marked with ``alias`` as listed."""
    data = bytes(result)
    try:
        said = _described.decode(data).description
    except msgspec.ValidationError:
        return result  # not an object: passed on for the agent to judge
    if pinned is not None:
        description: object = as_listed(alias, pinned)
    elif isinstance(said, str):
        description = as_listed(alias, clean_text(said)[0])
    else:
        description = said
    carries = any(m in data for m in _MARKERS)
    if description == said and not carries:
        return result
    decoded = msgspec.json.decode(data)
    if not isinstance(decoded, dict):
        return result
    changed = description != said
    if changed:
        decoded["description"] = description
    messages = decoded.get("messages") if carries else None
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict):
            changed = _blocks(message.get("content"), to_agent, _DEFINING) or changed
    return decoded if changed else result


def read_result(result: Raw, to_agent: ToAgent, budget: int) -> Raw | rpc.JsonObject:
    """A resources/read result: each content's URI rewritten, text cut to the budget."""
    decoded = msgspec.json.decode(result)
    contents = decoded.get("contents") if isinstance(decoded, dict) else None
    if not isinstance(contents, list):
        return result
    changed = False
    total = sum(
        len(c["text"]) for c in contents if isinstance(c, dict) and isinstance(c.get("text"), str)
    )
    remaining = budget
    for item in contents:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("uri"), str):
            new = to_agent(item["uri"])
            if new != item["uri"]:
                item["uri"], changed = new, True
        changed = _cleaned(item, ("mimeType",)) or changed
        text = item.get("text")
        if isinstance(text, str) and total > budget:
            item["text"] = text[: max(remaining, 0)]
            remaining -= len(item["text"])
            changed = True
    if total > budget:
        meta = decoded.setdefault("_meta", {})
        if isinstance(meta, dict):
            meta["mcpd/truncated"] = {"characters": total, "budget": budget}
        # Only a text takes the note: a server may give "text" anything.
        texts = [c for c in contents if isinstance(c, dict) and isinstance(c.get("text"), str)]
        if texts:
            texts[-1]["text"] += (
                f"\n[mcpd: {total - budget} more characters were cut here; this resource is "
                f"{total} characters and the budget is {budget}.]"
            )
    return decoded if changed else result
