"""Which of mcpd's environment variables a stdio server seems to rely on, now that it
inherits only the default set and what its ``inherit_env`` names.

A variable set in the environment looked at (the one ``check-config`` or ``import``
runs in) is one the server relies on when the server does not get it (it is not in
the default set, its own ``env`` or its ``inherit_env``) and either:

- its command line names it for a shell to expand (``$NAME`` or ``${NAME}`` in an
  argument, written ``$$NAME`` in mcpd's config), or
- the variable is named for the server: the first word of the name (``GITHUB`` of
  ``GITHUB_PERSONAL_ACCESS_TOKEN``, at least three letters) is a word of the server's
  alias, command or arguments (``@modelcontextprotocol/server-github``), words common
  to every server (``mcp``, ``server``, ``npx``, ...) aside.

The variables a shell keeps for itself (``PWD``, ``SHLVL``, ...) are never among them.

``check-config`` warns about each such variable by name; ``mcpd import`` writes them
into the server's ``inherit_env``, so an imported server keeps what it had.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Final

from transports.stdio.process.childenv import in_default_set, matches, never_inherited

from ..tables.servertable import ServerConfig

_WORD: Final = re.compile(r"[a-z0-9]+")
_SHELL_REF: Final = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
# Words of almost every server's command line: they say nothing about which server.
_COMMON: Final = frozenset(
    {
        "mcp",
        "server",
        "servers",
        "modelcontextprotocol",
        "npx",
        "uvx",
        "uv",
        "run",
        "node",
        "python",
        "python3",
        "bin",
        "usr",
        "local",
        "stdio",
        "latest",
        "the",
        "sdk",
        "api",
        "key",
        "token",
        "dist",
        "index",
        "main",
        "src",
        "lib",
        "opt",
        "home",
    }
)


# Kept by a shell for itself, set anew by the server's own shell if it runs one: a word
# of its command line (``pwd``) names none of them.
_SHELL_OWN: Final = frozenset({"PWD", "OLDPWD", "SHLVL", "_"})


def _words(*texts: str) -> set[str]:
    found: set[str] = set()
    for text in texts:
        found |= {w for w in _WORD.findall(text.lower()) if len(w) >= 3}
    return found - _COMMON


def gets(name: str, cfg: ServerConfig) -> bool:
    """Whether the server gets ``name`` from mcpd's environment or its own ``env``."""
    if name in cfg.env or in_default_set(name) or cfg.inherit_env is True:
        return True
    return isinstance(cfg.inherit_env, list) and any(matches(name, p) for p in cfg.inherit_env)


def relied_on(alias: str, cfg: ServerConfig, env: Mapping[str, str]) -> list[str]:
    """The variables of ``env`` the server seems to rely on and does not get."""
    if cfg.command is None:
        return []
    own = _words(alias, os.path.basename(cfg.command), *cfg.args)
    in_args = {m.group(1) for a in [cfg.command, *cfg.args] for m in _SHELL_REF.finditer(a)}
    found = []
    for name in sorted(env):
        if never_inherited(name) or name in _SHELL_OWN or gets(name, cfg):
            continue
        first = name.split("_", 1)[0].lower()
        if name in in_args or (len(first) >= 3 and first in own):
            found.append(name)
    return found
