"""Names a server's own settings give that the server does not list.

``[servers.X.tools]`` (``allow``, ``rename``, ``description``), ``tool_timeouts`` and
``[servers.X.prompts]`` name the server's items, which are known only once it lists
them, and may be listed later: so a name that matches nothing is no config error. It
is a likely typo all the same (an ``allow`` that matches nothing hides every tool), so
it is said in ``mcpd status`` beside the server, and in the journal once for each
list that leaves it unmatched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from fnmatch import fnmatchcase

from protocol.logfields import log_extra

from ..config.servertable import ServerConfig, ToolsConfig
from .catalog import Catalog

logger = logging.getLogger("mcpd.registry")


def unlisted(alias: str, cfg: ServerConfig, catalog: Catalog) -> list[str]:
    """One sentence for each setting of the server's that names what it does not list
    (none for a list it has not sent yet)."""
    out: list[str] = []
    tools = catalog.raw_tools(alias)
    if tools is not None:
        listed = {t.name for t in tools}
        out += _unmatched("tools", cfg.tools, listed, alias)
        out += _said("tool_timeouts", cfg.tool_timeouts, listed, alias)
    prompts = catalog.prompts.raw(alias)
    if prompts is not None:
        out += _unmatched("prompts", cfg.prompts, {p.name for p in prompts}, alias, " as a prompt")
    return out


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
    """What ``unlisted`` finds of each server, logged as it first finds it: a server
    listing again what it listed, or its status read by any number of agents, says
    nothing more."""

    def __init__(self, catalog: Catalog, configured: Callable[[str], ServerConfig | None]) -> None:
        self._catalog = catalog
        self._configured = configured
        self._logged: dict[str, list[str]] = {}

    def of(self, alias: str) -> list[str]:
        cfg = self._configured(alias)
        return [] if cfg is None else unlisted(alias, cfg, self._catalog)

    def check(self, alias: str) -> None:
        """The server listed, or its settings changed: say what they name in vain."""
        found = self.of(alias)
        before = self._logged.get(alias, [])
        if found == before:
            return
        self._logged[alias] = found
        for said in found:
            if said not in before:
                logger.warning(
                    "%s: %s", alias, said, extra=log_extra(alias, "unlisted_names", said)
                )
