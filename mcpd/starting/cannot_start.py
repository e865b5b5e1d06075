"""The daemon's own reason not to start, beside ``config.tables.model.ConfigError``.

It lives apart from the modules that raise it (the agents' sockets, the HTTP
endpoint, the demo launcher) so that ``serve`` can catch it without importing
any of them, and none of them imports another to raise it.
"""

from __future__ import annotations


class DaemonError(Exception):
    """The daemon cannot start (socket taken, unusable path); the message says why."""

    # What ``mcpd serve`` exits with: 1, a failure systemd may retry.
    exit_code = 1
