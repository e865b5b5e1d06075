"""Warnings about aliases that let one server's tools be named as another's.

A tool's local name is the template filled in with the alias and the tool's name, so
with ``mcp__{alias}__{tool}`` the server ``gh`` listing ``prod__merge_pr`` names a tool
as the server ``gh__prod`` names its ``merge_pr``. Such names are told apart (hashed)
when two tools meet, but a rule or a person reading ``mcp__gh__prod__merge_pr`` cannot
tell whose it is. Such aliases are still accepted: configs written before keep loading.
"""

from __future__ import annotations

import re
from typing import Final

from ..tables.model import Config

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_-]")


def _separator(template: str) -> str:
    """What the template writes between the alias and the tool's name."""
    alias, tool = template.find("{alias}"), template.find("{tool}")
    if alias < 0 or tool < alias:
        return ""
    return template[alias + len("{alias}") : tool]


def _prefix(template: str, alias: str) -> str:
    """How each local name of the server ``alias`` begins."""
    return _UNSAFE.sub("_", template.split("{tool}", 1)[0].replace("{alias}", alias))


def alias_warnings(config: Config) -> list[str]:
    templates = {config.naming.template}
    templates.update(p.template for p in config.profiles.values() if p.template is not None)
    out: list[str] = []
    aliases = sorted(config.servers)
    for template in sorted(templates):
        separator = _separator(template)
        for alias in aliases:
            if separator and separator in alias:
                out.append(
                    f"the alias {alias!r} holds {separator!r}, which the template {template!r} "
                    f"writes between an alias and a tool: another server's tools may be "
                    f"named as {alias}'s are (pick an alias without it)"
                )
        for alias in aliases:
            mine = _prefix(template, alias)
            for other in aliases:
                if other != alias and _prefix(template, other).startswith(mine):
                    out.append(
                        f"under the template {template!r}, the names of {alias}'s tools "
                        f"begin as those of {other}'s do ({mine!r}): a tool of {alias} "
                        f"may be named as one of {other} is"
                    )
    return out
