"""Names a server's own settings give that the server does not list.

``[servers.X.tools]`` (``allow``, ``rename``, ``description``), ``tool_timeouts`` and
``[servers.X.prompts]`` name the server's items, which are known only once it lists
them, and may be listed later: so a name that matches nothing is no config error. It
is a likely typo all the same (an ``allow`` that matches nothing hides every tool), so
it is said in ``mcpd status`` beside the server, and in the journal once for the names
a list holds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from fnmatch import fnmatchcase
from typing import NamedTuple

from protocol.shown.logfields import log_extra

from ...config.tables.servertable import ServerConfig, ToolsConfig
from .catalog import Catalog

logger = logging.getLogger("mcpd.registry")


class Listed(NamedTuple):
    """The names of the server's tools, or of its prompts, as it last listed them, and
    what its settings name in vain among them."""

    names: frozenset[str]
    unmatched: list[str]


def unlisted(alias: str, cfg: ServerConfig, catalog: Catalog) -> list[Listed]:
    """What the server's tools, then its prompts, leave unmatched of its settings (one
    sentence a setting); a list it has not sent yet is left out."""
    out: list[Listed] = []
    tools = catalog.raw_tools(alias)
    if tools is not None:
        names = frozenset(t.name for t in tools)
        found = _unmatched("tools", cfg.tools, names, alias)
        out.append(Listed(names, found + _said("tool_timeouts", cfg.tool_timeouts, names, alias)))
    prompts = catalog.prompts.raw(alias)
    if prompts is not None:
        names = frozenset(p.name for p in prompts)
        out.append(Listed(names, _unmatched("prompts", cfg.prompts, names, alias, " as a prompt")))
    return out


def names_items(cfg: ServerConfig) -> bool:
    """Whether the server's settings name any of its items at all."""
    rules = (cfg.tools, cfg.prompts)
    return bool(cfg.tool_timeouts) or any(r.allow or r.rename or r.description for r in rules)


def _unmatched(
    section: str, rules: ToolsConfig, listed: Collection[str], alias: str, kind: str = ""
) -> list[str]:
    allow = [p for p in rules.allow if not any(fnmatchcase(name, p) for name in listed)]
    out = _said(f"{section}.allow", allow, listed, alias, kind)
    out += _said(f"{section}.rename", rules.rename, listed, alias, kind)
    out += _said(f"{section}.description", rules.description, listed, alias, kind)
    return out


def _said(
    key: str, names: Iterable[str], listed: Collection[str], alias: str, kind: str = ""
) -> list[str]:
    """``kind``: what the server does not list them as, when not as tools."""
    missing = [name for name in names if name not in listed]
    if not missing:
        return []
    return [f"{key} names {', '.join(missing)}, which {alias} does not list{kind}"]


class UnlistedNames:
    """What ``unlisted`` finds of each server, logged for each list whose names, or
    the settings that name its items, changed since: neither the server listing the
    same names again nor its status read by any number of agents says it again."""

    def __init__(self, catalog: Catalog, configured: Callable[[str], ServerConfig | None]) -> None:
        self._catalog = catalog
        self._configured = configured
        self._logged: dict[str, list[Listed]] = {}

    def _found(self, alias: str) -> list[Listed]:
        cfg = self._configured(alias)
        if cfg is None or not names_items(cfg):
            return []
        return unlisted(alias, cfg, self._catalog)

    def of(self, alias: str) -> list[str]:
        return [said for listed in self._found(alias) for said in listed.unmatched]

    def check(self, alias: str) -> None:
        """The server listed, or its state or settings changed: say what its settings
        name in vain, once for the names it lists now."""
        found = self._found(alias)
        logged = self._logged.get(alias, [])
        self._logged[alias] = found
        for listed in found:
            if listed in logged:
                continue
            for said in listed.unmatched:
                logger.warning(
                    "%s: %s", alias, said, extra=log_extra(alias, "unlisted_names", said)
                )
