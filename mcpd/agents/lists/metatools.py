"""The three meta-tools an agent sees in the "search" discovery mode, and their results.

Instead of every tool, ``tools/list`` then holds these; the index is
``mcpd.registry.profiles.search``.

``mcpd_search_tools {query: string (..1000 characters), limit?: integer 1..50 (8)}``
    Read-only. ``structuredContent``::

        {"query": "...", "total": 56,          # tools searched (the profile's view)
         "tools": [{"name": "mcp__git__git_status", "server": "git", "score": 7.1,
                    "description": "[git] Shows the working tree status",
                    "available": true}, ...]}  # best first

    A tool of a server that is down has ``"available": false``, ``"unavailable":
    MARKER`` and a description starting ``[MARKER] ``, the same words the full list
    shows. The text content says the same in lines a model reads.

``mcpd_describe_tools {names: [string, ...] (1..20)}``
    Read-only. ``structuredContent``: ``{"tools": [TOOL, ...], "unknown": [name, ...]}``
    where TOOL is the definition as the full list has it: ``name``, ``title``,
    ``description``, ``inputSchema``, ``outputSchema``, ``annotations``, plus ``server``
    and ``available``. The text content is the same JSON. ``isError`` when no name
    is known.

``mcpd_call_tool {name: string, arguments?: object}``
    Calls that tool with those arguments; the result is the tool's own, routed exactly
    like a direct ``tools/call`` (outages, time limits, budgets and all). A meta-tool
    cannot be called through it.

The names fit ``[A-Za-z0-9_-]`` and leave room for a host's prefix within 64 characters
(Claude Code's ``mcp__mcpd__`` makes ``mcp__mcpd__mcpd_describe_tools``, 30).
Arguments are read leniently, as models write them: ``names`` may be one string,
``arguments`` a JSON string of an object, and unknown keys are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

import msgspec
from msgspec import UNSET, Raw

from protocol.mcp import core as mcp

from ...registry.naming.spelling import CALL_TOOL, DESCRIBE_TOOL, SEARCH_TOOL

if TYPE_CHECKING:
    from ...registry.profiles.search import Hit

# Spelled where local names are made, which gives no server's tool one of them.
SEARCH: Final = SEARCH_TOOL
DESCRIBE: Final = DESCRIBE_TOOL
CALL: Final = CALL_TOOL
NAMES: Final = (SEARCH, DESCRIBE, CALL)
DEFAULT_LIMIT: Final = 8
MAX_LIMIT: Final = 50
MAX_DESCRIBE: Final = 20
MAX_NAME: Final = 1024  # the longest local name [naming] max_length allows
# A search runs on the event loop, at a cost that grows with its terms, and its result
# repeats the query: a model asks in a few words, so this is far past any honest query
# and keeps one search from holding every other agent up or swelling its reply.
MAX_QUERY: Final = 1000

_STRING: Final = {"type": "string"}
_READ_ONLY: Final = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}
# Whatever the called tool does: the cautious value of every hint.
_ANY_EFFECT: Final = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}

SEARCH_INPUT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "maxLength": MAX_QUERY,
            "description": "What you want to do, in a few words: 'show uncommitted changes', "
            "'create ticket', 'read file'. A server's name finds its tools.",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_LIMIT,
            "default": DEFAULT_LIMIT,
            "description": "How many tools to return, best first.",
        },
    },
    "required": ["query"],
}
SEARCH_OUTPUT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "query": _STRING,
        "total": {"type": "integer"},
        "tools": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": _STRING,
                    "server": _STRING,
                    "description": _STRING,
                    "score": {"type": "number"},
                    "available": {"type": "boolean"},
                    "unavailable": _STRING,
                },
                "required": ["name", "server", "description", "score", "available"],
            },
        },
    },
    "required": ["query", "total", "tools"],
}
DESCRIBE_INPUT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "names": {
            "type": "array",
            "items": _STRING,
            "minItems": 1,
            "maxItems": MAX_DESCRIBE,
            "description": f"Tool names from {SEARCH}.",
        }
    },
    "required": ["names"],
}
DESCRIBE_OUTPUT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "tools": {"type": "array", "items": {"type": "object"}},
        "unknown": {"type": "array", "items": _STRING},
    },
    "required": ["tools", "unknown"],
}
CALL_INPUT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "The tool's name, as search returned it."},
        "arguments": {
            "type": "object",
            "description": f"The tool's arguments, as its inputSchema from {DESCRIBE} says.",
        },
    },
    "required": ["name"],
}


def meta_tools(servers: Sequence[str] = (), total: int | None = None) -> list[mcp.Tool]:
    """The meta-tools for ``tools/list``. ``servers`` and ``total`` (the profile's
    servers and tool count) go into the search tool's description, so a model knows
    what there is to find before it asks."""
    where = ""
    if total is not None:
        where = f" {total} tools"
        if servers:
            where += f" from: {', '.join(sorted(servers))}"
        where = f"{where}."
    return [
        _tool(
            SEARCH,
            "Search tools",
            "Find the tools for a task. Returns the best matching tool names with one "
            f"line each and whether their server is up.{where} Then call {DESCRIBE} for "
            f"the input schemas and {CALL} to run one.",
            SEARCH_INPUT,
            SEARCH_OUTPUT,
            _READ_ONLY,
        ),
        _tool(
            DESCRIBE,
            "Describe tools",
            f"Full definitions (description, input schema, annotations) of tools named by "
            f"{SEARCH}, to know their arguments before calling them.",
            DESCRIBE_INPUT,
            DESCRIBE_OUTPUT,
            _READ_ONLY,
        ),
        _tool(
            CALL,
            "Call a tool",
            f"Run a tool found with {SEARCH} with the arguments its input schema asks for, "
            "and return that tool's result.",
            CALL_INPUT,
            None,
            _ANY_EFFECT,
        ),
    ]


def _tool(
    name: str,
    title: str,
    description: str,
    schema: dict[str, Any],
    output: dict[str, Any] | None,
    annotations: dict[str, Any],
) -> mcp.Tool:
    return mcp.Tool(
        name=name,
        title=title,
        description=description,
        inputSchema=Raw(_encode(schema)),
        outputSchema=Raw(_encode(output)) if output is not None else UNSET,
        annotations=dict(annotations),
        meta={"mcpd/server": "mcpd", "mcpd/available": True},
    )


_encode: Final = msgspec.json.Encoder().encode


# -- arguments --


class ArgumentError(ValueError):
    """Arguments a meta-tool cannot use; ``str()`` is the text for an ``isError`` result."""


class SearchArgs(msgspec.Struct):
    query: str
    limit: int = DEFAULT_LIMIT


class DescribeArgs(msgspec.Struct):
    names: list[str] | str

    def name_list(self) -> list[str]:
        names = [self.names] if isinstance(self.names, str) else self.names
        return list(dict.fromkeys(n for n in names if n))


class CallArgs(msgspec.Struct):
    name: str
    arguments: dict[str, Any] | str | None = None

    def argument_object(self) -> dict[str, object]:
        if isinstance(self.arguments, dict):
            return self.arguments
        if self.arguments is None or self.arguments.strip() == "":
            return {}
        try:
            value = msgspec.json.decode(self.arguments)
        except (msgspec.DecodeError, RecursionError):
            value = None
        if not isinstance(value, dict):
            raise ArgumentError(f"{CALL}: 'arguments' must be an object (or JSON of one)")
        return value


_T = TypeVar("_T")


def _read(tool: str, arguments: Raw | bytes | Mapping[str, object] | None, kind: type[_T]) -> _T:
    try:
        if isinstance(arguments, Raw | bytes):
            return msgspec.json.decode(bytes(arguments) or b"{}", type=kind)
        return msgspec.convert(dict(arguments or {}), kind)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
        raise ArgumentError(f"{tool}: {exc}") from None


def parse_search(arguments: Raw | bytes | Mapping[str, object] | None) -> SearchArgs:
    args = _read(SEARCH, arguments, SearchArgs)
    if not args.query.strip():
        raise ArgumentError(f"{SEARCH}: 'query' is empty; say what you want to do")
    if len(args.query) > MAX_QUERY:
        raise ArgumentError(
            f"{SEARCH}: 'query' is at most {MAX_QUERY} characters; say what you want to do "
            "in a few words"
        )
    return SearchArgs(args.query, min(max(args.limit, 1), MAX_LIMIT))


def parse_describe(arguments: Raw | bytes | Mapping[str, object] | None) -> list[str]:
    names = _read(DESCRIBE, arguments, DescribeArgs).name_list()
    if not names:
        raise ArgumentError(f"{DESCRIBE}: 'names' is empty; pass names from {SEARCH}")
    if len(names) > MAX_DESCRIBE:
        raise ArgumentError(f"{DESCRIBE}: at most {MAX_DESCRIBE} names at once")
    if any(len(name) > MAX_NAME for name in names):
        # No tool is named so (names are cut to at most 1,024 characters), and an
        # unknown name is said back twice: the answer would be as large as the ask.
        raise ArgumentError(f"{DESCRIBE}: a tool name is at most {MAX_NAME} characters")
    return names


def parse_call(
    arguments: Raw | bytes | Mapping[str, object] | None,
) -> tuple[str, dict[str, object]]:
    """The tool to call and its arguments."""
    args = _read(CALL, arguments, CallArgs)
    if args.name in NAMES:
        raise ArgumentError(f"{CALL}: {args.name} is called directly, not through {CALL}")
    return args.name, args.argument_object()


# -- results --


def error_result(text: str) -> mcp.CallToolResult:
    return mcp.text_result(text, is_error=True)


def search_result(
    query: str,
    hits: Sequence[Hit],
    *,
    total: int,
    markers: Mapping[str, str] | None = None,
    held: Mapping[str, str] | None = None,
) -> mcp.CallToolResult:
    """The result of ``mcpd_search_tools``. ``markers`` maps the alias of each server
    that is down to the words its tools carry in the full list (``unavailable: tickets
    is down since 19:09:42, retrying at 19:09:44``); ``held``, the name of each tool
    held until it is approved to its words (``held: its definition changed ...``)."""
    markers = markers or {}
    held = held or {}
    found: list[dict[str, Any]] = []
    lines = [f'Tools for "{_line(query)}", best first ({len(hits)} of {total}):']
    for hit in hits:
        marker = held.get(hit.name) or markers.get(hit.server)
        description = f"[{hit.server}] {hit.summary}".rstrip()
        if marker:
            description = f"[{marker}] {description}"
        item: dict[str, Any] = {
            "name": hit.name,
            "server": hit.server,
            "description": description,
            "score": hit.score,
            "available": marker is None,
        }
        if marker:
            item["unavailable"] = marker
        found.append(item)
        lines.append(f"- {hit.name}: {description}")
    if hits:
        lines.append(
            f"Next: {DESCRIBE} with the names you want, for their input schemas; "
            f"then {CALL} with a name and its arguments."
        )
    else:
        lines = [
            f'No tool matches "{_line(query)}" among {total}. Try other words: a verb and '
            'a thing ("read file", "create ticket"), or a server\'s name.'
        ]
    return mcp.CallToolResult(
        content=[mcp.TextContent("\n".join(lines))],
        structuredContent={"query": query, "total": total, "tools": found},
    )


_DEFINITION_KEYS: Final = ("name", "title", "description", "inputSchema", "outputSchema",
                           "annotations")  # fmt: skip


def describe_result(
    tools: Sequence[Mapping[str, object]], unknown: Sequence[str] = ()
) -> mcp.CallToolResult:
    """The result of ``mcpd_describe_tools``: ``tools`` as the full list has them (the
    daemon's listed entries, outage marker and all), ``unknown`` the names it has not."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        meta = tool.get("_meta")
        if not isinstance(meta, dict):
            meta = {}
        item = {k: tool[k] for k in _DEFINITION_KEYS if tool.get(k) is not None}
        item["server"] = meta.get("mcpd/server")
        item["available"] = meta.get("mcpd/available", True) is not False
        out.append(item)
    body = {"tools": out, "unknown": list(unknown)}
    text = _encode(body).decode()
    if unknown:
        text += f"\nUnknown: {', '.join(unknown)}. Names are exactly as {SEARCH} returns them."
    return mcp.CallToolResult(
        content=[mcp.TextContent(text)],
        structuredContent=body,
        isError=True if not out else UNSET,
    )


def _line(text: str) -> str:
    return " ".join(text.split())[:200]
