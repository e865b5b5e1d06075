"""What a server asks an agent (elicitation, sampling, roots), made fit to pass on.

A legacy server's request reaches the agent as a request of mcpd's own (or inside
mcpd's ``input_required``), and what it says is read by a person (an elicitation's
message and its form's titles and descriptions) or by a model (a sampling request's
messages, system prompt and tools). It is a server's text like its descriptions, so
it is cleaned as they are (``clean``). What the agent answers with (a property's
name, an enum's values, a default, a ``const``) is left as the server wrote it: the
server reads the answer by those.

The request also says which server asks, in words no server can write: mcpd's
``_meta`` key ``mcpd/server`` (whatever the server put under mcpd's keys is dropped),
and above an elicitation's message a line of mcpd's naming the server, with every
line of the server's own quoted (``quoting``), as the servers' instructions are. A
host shows the form's titles and descriptions as they are: each of their lines that
begins with a bracket gets the server's mark, and a title is one line
(``marking``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final, TypeVar

from .clean import clean_text, clean_value
from .marking import breaks_as_spaces, lines_marked
from .quoting import quoted_lines

SERVER_KEY: Final = "mcpd/server"
_OWN_KEYS: Final = "mcpd/"
_SHOWN: Final = frozenset({"title", "description"})
T = TypeVar("T")
# What of a sampling request goes before a model: all of its strings are for it.
_SAMPLED: Final = ("messages", "systemPrompt", "tools")


def cleaned(method: str, params: T) -> tuple[T, int]:
    """``params`` (decoded, the caller's own: changed in place) with the texts a person
    or a model reads cleaned, and how many characters went."""
    if not isinstance(params, dict):
        return params, 0
    removed = 0
    if method == "elicitation/create":
        message = params.get("message")
        if isinstance(message, str):
            params["message"], removed = clean_text(message)
        removed += _clean_form(params.get("requestedSchema"))
    elif method == "sampling/createMessage":
        for key in _SAMPLED:
            if key in params:
                params[key], count = clean_value(params[key])
                removed += count
    return params, removed


def every_object(value: object) -> Iterator[dict[str, object]]:
    """Every object in decoded JSON ``value``, however deep, each yielded before what it
    holds is walked; walked with a stack: a deep value is not a deep recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            yield item
            stack.extend(item.values())


def _clean_form(schema: Any) -> int:
    """The titles and descriptions in a form's schema, however deep, and its legacy
    ``enumNames``, cleaned in place."""
    removed = 0
    for item in every_object(schema):
        for key, value in item.items():
            if key in _SHOWN and isinstance(value, str):
                item[key], count = clean_text(value)
            elif key == "enumNames" and isinstance(value, list):
                item[key], count = clean_value(value)
            else:
                continue
            removed += count
    return removed


def _mark_form(alias: str, schema: Any) -> None:
    """The titles and descriptions of a (cleaned) form's schema, in place: each line
    that begins with a bracket marked with ``alias``, a title made one line."""
    for item in every_object(schema):
        for key in _SHOWN:
            value = item.get(key)
            if isinstance(value, str):
                item[key] = lines_marked(
                    alias, breaks_as_spaces(value) if key == "title" else value
                )


def marked_params(alias: str, method: str, params: object) -> dict[str, object]:
    """``params`` as the agent gets them: saying that the server ``alias`` asks."""
    out: dict[str, object] = dict(params) if isinstance(params, dict) else {}
    given = out.get("_meta")
    meta = (
        {k: v for k, v in given.items() if not k.startswith(_OWN_KEYS)}
        if isinstance(given, dict)
        else {}
    )
    meta[SERVER_KEY] = alias
    out["_meta"] = meta
    if method == "elicitation/create":
        message = out.get("message")
        lines = [f"[mcpd] The server {alias!r} asks:"]
        if isinstance(message, str):
            lines += quoted_lines(message)
        out["message"] = "\n".join(lines)
        _mark_form(alias, out.get("requestedSchema"))
    return out
