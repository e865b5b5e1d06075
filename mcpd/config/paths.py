"""Where the daemon's socket is.

The daemon (``mcpd serve``, and ``prestart``, which checks before the daemon is up
whether another one already listens there) listens on ``--socket``, else the config's
``[daemon] socket``, else ``$MCPD_SOCKET``, else under systemd the unit's
RuntimeDirectory= (``/run/mcpd/mcpd.sock``), else ``default_socket_path()``.

No trio here, and nothing that imports it: ``prestart`` runs before trio is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .model import default_socket_path

SOCKET_VAR = "MCPD_SOCKET"
SOCKET_FILE = "mcpd.sock"  # its name in the unit's RuntimeDirectory=


def runtime_directory(env: Mapping[str, str] | None = None) -> str | None:
    """The unit's RuntimeDirectory= (the first, if there are several), or None."""
    env = os.environ if env is None else env
    return env.get("RUNTIME_DIRECTORY", "").split(":")[0] or None


def daemon_socket_path(
    explicit: str | None,
    configured: str | None,
    *,
    runtime_dir: str | None,
    env: Mapping[str, str] | None = None,
) -> str:
    """Where ``mcpd serve`` listens. ``runtime_dir`` is passed rather than read: the
    daemon reads systemd's variables once and then removes them from its environment."""
    env = os.environ if env is None else env
    if explicit:
        return explicit
    if configured:
        return configured
    if env.get(SOCKET_VAR):
        return env[SOCKET_VAR]
    if runtime_dir:
        # The default path for the service's uid is not where mcpd.socket and clients look.
        return os.path.join(runtime_dir, SOCKET_FILE)
    return default_socket_path(env)
