"""The user-wide file each host keeps its MCP servers in, for ``mcpd import HOST``.

The hosts ``mcpd connect`` writes to are found where it writes (``hostconfig``), so
an import reads the very file a connect would change. Windsurf and Zed are read only:
Windsurf's ``~/.codeium/windsurf/mcp_config.json``, and Zed's ``settings.json`` in
``$XDG_CONFIG_HOME/zed`` (``~/.config/zed`` on macOS as well). Codex keeps TOML,
which ``mcpd import`` does not read.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from .hostconfig import config_path

_CONNECTED: Final = ("claude-code", "claude-desktop", "cursor", "vscode", "gemini-cli")
_READ_ONLY: Final = ("windsurf", "zed")
HOST_NAMES: Final = (*_CONNECTED, *_READ_ONLY)


def unread_host(arg: str, *, env: Mapping[str, str] | None = None) -> str | None:
    """Why ``mcpd import ARG`` cannot read what ARG names, when it is Codex (a host
    ``mcpd connect`` knows, whose TOML is not read) or a TOML file; else None."""
    env = os.environ if env is None else env
    if arg == "codex" and not os.path.exists(arg):
        where = f"Codex's servers ({config_path('codex', env=env)}, TOML)"
    elif arg.endswith(".toml"):
        where = f"{arg}: a TOML file"
    else:
        return None
    return (
        f"{where} cannot be imported: mcpd import reads hosts' JSON files. Codex's "
        "[mcp_servers.NAME] tables are written as [servers.NAME] in mcpd's config by hand; "
        "command, args, env, cwd and url keep their names"
    )


def no_such_host(arg: str) -> str:
    """Where ``arg`` is neither a file nor a host's name, the names ``mcpd import``
    knows ("" otherwise): a misspelt host reads as a file that is not there."""
    if arg in HOST_NAMES or os.path.lexists(arg):
        return ""
    return f"; nor is it a host mcpd knows: {', '.join(HOST_NAMES)}"


def import_source(
    arg: str, *, env: Mapping[str, str] | None = None, system: str | None = None
) -> str:
    """``arg`` itself when it is a file (or names no host), else the host's file."""
    if os.path.exists(arg) or arg not in HOST_NAMES:
        return arg
    env = os.environ if env is None else env
    if arg in _CONNECTED:
        return str(config_path(arg, env=env, system=system))
    home = env.get("HOME") or str(Path.home())
    if arg == "windsurf":
        return f"{home}/.codeium/windsurf/mcp_config.json"
    xdg = env.get("XDG_CONFIG_HOME")
    if (system or sys.platform) == "darwin" or not xdg:
        return f"{home}/.config/zed/settings.json"
    return f"{xdg}/zed/settings.json"
