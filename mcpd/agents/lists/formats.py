"""The aggregated tools as model APIs take tool definitions, and a check of name lengths.

A program that calls a model API itself (no MCP host in between) can hand the model
mcpd's tools in the API's own shape and route the model's tool calls to
``tools/call``. The APIs take a name, a description and a JSON Schema for the input;
everything else an MCP tool carries is left out: ``title``, ``annotations``,
``outputSchema``, ``icons`` and ``_meta`` (where mcpd notes the server, the original
name and availability). ``tools/list`` and ``mcpd tools --json`` keep all of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

# A tool as mcpd lists it, and as an API takes it: JSON objects of a server's making.
ToolJson = dict[str, object]
Shape = Callable[[ToolJson], ToolJson]


def _schema(tool: ToolJson) -> ToolJson:
    schema = tool.get("inputSchema")
    return schema if isinstance(schema, dict) else {"type": "object"}


def _description(tool: ToolJson) -> str:
    return str(tool.get("description") or "")


def anthropic(tool: ToolJson) -> ToolJson:
    """A ``tools`` entry of Anthropic's Messages API."""
    return {"name": tool["name"], "description": _description(tool), "input_schema": _schema(tool)}


def _function(tool: ToolJson) -> ToolJson:
    return {"name": tool["name"], "description": _description(tool), "parameters": _schema(tool)}


def openai(tool: ToolJson) -> ToolJson:
    """A ``tools`` entry of OpenAI's Chat Completions API."""
    return {"type": "function", "function": _function(tool)}


def openai_responses(tool: ToolJson) -> ToolJson:
    """A ``tools`` entry of OpenAI's Responses API: the same fields, not nested."""
    return {"type": "function", **_function(tool)}


FORMATS: Final[dict[str, Shape]] = {
    "anthropic": anthropic,
    "openai": openai,
    "openai-responses": openai_responses,
}


def translate(tools: Iterable[ToolJson], fmt: str) -> list[ToolJson]:
    shape = FORMATS[fmt]
    return [shape(t) for t in tools]


def too_long(names: Iterable[str], limit: int, prefix: str = "") -> list[str]:
    """The names that do not fit ``limit`` characters once a host adds ``prefix``."""
    return [n for n in names if len(prefix) + len(n) > limit]
