"""Which of a server's tools agents see, under which name, and how many tools in all.

A host fills a model's context with every tool it is given, and several cap the list
(128 is a common limit). Curation is applied where the registry takes a server's list,
so a hidden tool is neither listed nor callable: it has no local name to call. The
operator's ``rename`` gives its names before the server's own names are kept
(``curated_names``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Collection, Mapping, Sequence
from fnmatch import fnmatchcase

import msgspec

from protocol.mcp import core as mcp
from protocol.shown.logfields import log_extra

from ...config.tables.servertable import ToolsConfig
from ..naming.facing import sanitize, spellings

logger = logging.getLogger("mcpd.registry")


class Curated(msgspec.Struct):
    tools: dict[str, mcp.Tool]  # by the name agents see (before the naming template)
    originals: dict[str, str]  # that name -> the server's own, for renamed tools
    hidden: list[str]  # the server's names of tools left out


def lets_through(name: str, rules: ToolsConfig) -> bool:
    """Whether the server's ``allow``/``deny`` let its item ``name`` through: ``deny`` as
    the server spells it and as agents know it (``facing.spellings``), ``allow`` as the
    server spells it only, so that neither lets a look-alike of a name through."""
    if rules.allow and not any(fnmatchcase(name, p) for p in rules.allow):
        return False
    return not any(fnmatchcase(f, p) for p in rules.deny for f in spellings(name))


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
    shown = [t for t in tools if lets_through(t.name, rules)]
    hidden = sorted({t.name for t in tools} - {t.name for t in shown})
    names = curated_names([t.name for t in shown], rules.rename, alias, "tool")
    out: dict[str, mcp.Tool] = {}
    originals: dict[str, str] = {}
    for tool in shown:
        name = names.get(tool.name)
        if name is None:
            hidden.append(tool.name)
            continue
        description = rules.description.get(tool.name)
        if description is not None:
            tool = msgspec.structs.replace(tool, description=description)
        out[name] = tool
        if name != tool.name:
            originals[name] = tool.name
    return Curated(out, originals, hidden)


def curated_names(
    listed: Sequence[str], rename: Mapping[str, str], alias: str, kind: str
) -> dict[str, str]:
    """The name agents see (before the template) of each of a server's items, by the
    server's name; one left without a name is not in it.

    The operator's ``rename`` gives its names first. An item the server lists under a
    name agents would know as one a rename gives (``deploy.prod`` beside a rename to
    ``deploy_prod``: ``facing.sanitize``) is listed under another (``displaced_name``),
    as a local name two tools want is hashed: a server cannot take the renamed item's
    name, nor the rules and profile patterns written for it, by listing an item of that
    name or of one that reads as it (held or not)."""
    out: dict[str, str] = {}
    given: set[str] = set()
    renamed: dict[str, str] = {}  # a rename's name, as agents know it -> the server's
    for name in listed:
        new = rename.get(name)
        # Two renames onto one name are refused with the config; past that, the first.
        if new is not None and new not in given:
            given.add(new)
            out[name] = new
            renamed.setdefault(sanitize(new), name)
    # Every name agents know an item by; the server's own items that read alike are
    # told apart by the table, which hashes them all.
    known = set(renamed)
    displaced: list[str] = []
    for name in listed:
        if name in rename:
            continue
        if sanitize(name) in renamed:
            displaced.append(name)
        else:
            out[name] = name
            known.add(sanitize(name))
    for name in sorted(displaced):
        other = displaced_name(alias, name, known)
        if other is not None:
            out[name] = other
            known.add(sanitize(other))
        where = f"listed as {other!r}" if other is not None else "left out"
        logger.warning(
            "%s: the server's %s %r is %s: rename gives its name to %r",
            alias,
            kind,
            name,
            where,
            renamed[sanitize(name)],
            extra=log_extra(alias or None, "rename"),
        )
    return out


def displaced_name(alias: str, name: str, known: Collection[str]) -> str | None:
    """A name for the server's item ``name`` that a rename gave another: ``name``, ``_``
    and a hash of ``alias::name``, of as many digits as it takes to read as no name in
    ``known`` (names as agents know them; None: every length is taken, by names the
    server lists itself)."""
    digest = hashlib.sha1(f"{alias}::{name}".encode()).hexdigest()
    for digits in range(6, len(digest) + 1, 2):
        other = f"{name}_{digest[:digits]}"
        if sanitize(other) not in known:
            return other
    return None


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
