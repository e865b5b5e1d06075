"""The daemon's own socket, as it takes it up to serve agents on: the one bound before
any server started (``listening``), or the one systemd passed, and where it really is.

systemd's socket wins over the config's path: ``mcpd.socket`` says where agents look,
and root's commands, which read the config's path, are told in the log where mcpd is.
A socket systemd was to pass and did not, or passed in a shape mcpd cannot serve, is
bound here at the config's path instead.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import trio

from protocol.shown.logfields import log_extra

from ..agents.entry.unix_socket import SocketFile, bind_unix
from ..config.checks.socket_access import access_warnings, socket_group
from ..config.tables.model import Config
from ..local.service.systemd import ListenSocket, adopt_listener
from .listening import Listening

logger = logging.getLogger("mcpd")


class AgentsListener(NamedTuple):
    listener: trio.SocketListener
    listening: Listening  # the rest bound before any server started, served later
    owned: SocketFile | None  # the socket file mcpd bound, removed as it stops
    path: str  # where agents reach mcpd


def take_listener(
    config: Config, path: str, passed: list[ListenSocket], prebound: Listening | None
) -> AgentsListener:
    """The socket to serve agents on at the config's ``path``: from ``prebound`` (what
    ``mcpd serve`` bound) or bound here, unless systemd ``passed`` one."""
    listener = adopt_listener(passed)
    listening = prebound or Listening()
    try:
        if prebound is None:
            listening.bind(config, path if listener is None else None)
        if listener is None and listening.socket is None:
            # systemd was to pass the socket, and passed none mcpd can use.
            group = socket_group(config.daemon.allow_groups)
            listening.socket = bind_unix(path, config.socket_mode(), group)
    except BaseException:
        listening.close()
        raise
    own = listening.take_socket()
    if own is not None:
        d = config.daemon
        for warning in access_warnings("daemon", path, own.mode, d.allow_uids, d.allow_groups):
            logger.warning("%s", warning, extra=log_extra(None, "config"))
        return AgentsListener(own.listener(), listening, own.file, path)
    assert listener is not None
    bound = listener.socket.getsockname()
    if isinstance(bound, str) and bound and bound != path:
        logger.warning(
            "listening on %s, the socket systemd passed (mcpd.socket), not on "
            "%s; to move it, set ListenStream= in mcpd.socket",
            bound,
            path,
            extra=log_extra(None, "config"),
        )
        path = bound
    return AgentsListener(listener, listening, None, path)
