"""Which of a server's tools agents see, under which name, and how many tools in all.

A host fills a model's context with every tool it is given, and several cap the list
(128 is a common limit). Curation is applied where the registry takes a server's list,
so a hidden tool is neither listed nor callable: it has no local name to call.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from fnmatch import fnmatchcase

import msgspec

from protocol import mcp
from protocol.logfields import log_extra

from ..config.servertable import ToolsConfig

logger = logging.getLogger("mcpd.registry")


class Curated(msgspec.Struct):
    tools: dict[str, mcp.Tool]  # by the name agents see (before the naming template)
    originals: dict[str, str]  # that name -> the server's own, for renamed tools
    hidden: list[str]  # the server's names of tools left out


def visible(name: str, rules: ToolsConfig) -> bool:
    if rules.allow and not any(fnmatchcase(name, p) for p in rules.allow):
        return False
    return not any(fnmatchcase(name, p) for p in rules.deny)


def curate(
    tools: Sequence[mcp.Tool] | dict[str, mcp.Tool], rules: ToolsConfig | None, alias: str = ""
) -> Curated:
    """``tools`` by name, as a list or as the table's own dict (kept as it is when there
    is nothing to curate: a copy per server would cost memory for nothing)."""
    if isinstance(tools, dict):
        if rules is None or rules == _NONE:
            return Curated(tools, {}, [])
        tools = list(tools.values())
    if rules is None or rules == _NONE:
        return Curated({t.name: t for t in tools}, {}, [])
    shown = [t for t in tools if visible(t.name, rules)]
    hidden = sorted({t.name for t in tools} - {t.name for t in shown})
    # Names kept as they are; a rename onto one of them would take another tool's name.
    kept = {t.name for t in shown if t.name not in rules.rename}
    out: dict[str, mcp.Tool] = {}
    originals: dict[str, str] = {}
    for tool in shown:
        description = rules.description.get(tool.name)
        if description is not None:
            tool = msgspec.structs.replace(tool, description=description)
        name = rules.rename.get(tool.name, tool.name)
        if name != tool.name and name in kept:
            logger.warning(
                "%s: not renaming %r to %r: the server has a tool of that name",
                alias,
                tool.name,
                name,
                extra=log_extra(alias or None, "rename"),
            )
            name = tool.name
        if name in out:  # only when renames chain onto names left in place above
            hidden.append(tool.name)
            continue
        out[name] = tool
        if name != tool.name:
            originals[name] = tool.name
    return Curated(out, originals, hidden)


_NONE = ToolsConfig()


class ToolBudget:
    """Warns once when the aggregated list grows past what hosts commonly accept, and
    once when it is back within the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.over = False

    def check(self, count: int) -> None:
        over = count > self.limit
        if over == self.over:
            return
        self.over = over
        if over:
            logger.warning(
                "%d tools in the aggregated list, more than max_tools (%d): some hosts "
                "refuse or truncate lists this long; hide tools with [servers.NAME.tools] "
                "allow/deny",
                count,
                self.limit,
                extra=log_extra(None, "max_tools"),
            )
        else:
            logger.info(
                "%d tools, within max_tools (%d) again",
                count,
                self.limit,
                extra=log_extra(None, "max_tools"),
            )

    def warning(self, count: int) -> str | None:
        if count <= self.limit:
            return None
        return f"{count} tools is more than max_tools ({self.limit}); some hosts refuse that many"
