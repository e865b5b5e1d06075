"""A reload's first step: the config file read again and judged before anything of the
daemon changes. A file that does not load, or a profile that would match no tool, is
refused whole with the error ``mcpd reload`` reports; a key changed that only a restart
puts in force is named; and the socket listening now stays the socket, whatever the
file says."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from protocol import jsonrpc as rpc
from protocol.logfields import log_extra

from .config.load import load
from .config.model import CONFIG_ERROR, Config, ConfigError
from .registry.catalog import Catalog
from .registry.views import unmatched

logger = logging.getLogger("mcpd")


@dataclass(frozen=True)
class Reread:
    config: Config  # to put in force, with the socket listening now
    restart: list[str]  # the keys changed that take a restart, not a reload


class Rereader:
    def __init__(
        self,
        path: str | None,
        started_with: Config,
        registry: Catalog,
        socket_for: Callable[[Config], str],
    ) -> None:
        """``path`` is the config file (None: there is none to read again);
        ``socket_for`` says where a restart with a config would listen."""
        self.path = path
        self._registry = registry
        self._socket_for = socket_for
        # What the endpoint was started with: a reload compares with this, not with the
        # config it read last, which may itself be waiting for a restart.
        self._http_listen = started_with.daemon.http_listen

    def read(self, running: Config, socket: str) -> Reread:
        """The file again, judged against ``running``, the config in force; raises
        ``rpc.RPCError`` when it is refused. ``socket`` is where mcpd listens now."""
        if self.path is None:
            raise rpc.RPCError(-32000, "mcpd was started without a config file to re-read")
        try:
            new = load(self.path)
            problem = unmatched_profile(new, self._registry, running)
            if problem is not None:
                raise problem
        except ConfigError as exc:
            logger.error(
                "reload rejected, keeping the running configuration: %s",
                exc,
                extra=log_extra(None, "reload", str(exc)),
            )
            # The data lets `mcpd reload` exit as every config error does (78).
            raise rpc.RPCError(
                -32000, f"config rejected: {exc}", {CONFIG_ERROR: str(exc)}
            ) from None
        restart = []
        if self._socket_for(new) != socket:
            restart.append("daemon.socket")
        if new.daemon.http_listen != self._http_listen:
            restart.append("daemon.http_listen")
        for key in restart:
            logger.warning(
                "%s changed; that takes a restart, not a reload",
                key,
                extra=log_extra(None, "reload"),
            )
        # The socket listening now is the one every server's sandbox must hide.
        new = msgspec.structs.replace(
            new, daemon=msgspec.structs.replace(new.daemon, socket=socket)
        )
        return Reread(new, restart)


def unmatched_profile(
    new: Config, registry: Catalog, old: Config | None = None
) -> ConfigError | None:
    """A profile of ``new`` that matches no tool, judged by the tools listed now;
    servers that a reload (from ``old``) adds or changes are not judged yet."""
    if not new.profiles:
        return None
    enabled = [a for a, c in new.servers.items() if c.enabled]
    unknown = [
        a for a in enabled if old is None or old.servers.get(a) != new.servers[a]
    ] if old is not None else []  # fmt: skip
    return unmatched(new.profiles, registry, new.naming, enabled, unknown)
