"""A reload's first step: the config file read again and judged before anything of the
daemon changes. A file that does not load, a profile that would match no tool, or one
whose socket cannot be bound (the daemon tries before it starts any server), is refused
whole with the error ``mcpd reload`` reports; a key changed that only a restart
puts in force is named, as are the settings the reload puts in force besides the
servers (profiles, rules, naming, daemon keys), those only connections opened from now
take apart, so that the person who changed them sees they were taken and when; and
the socket listening now stays the socket, whatever the file says."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from protocol.jsonrpc import messages as rpc
from protocol.shown.logfields import log_extra

from ..agents.connection.failures import kind_of
from ..config.loading.load import load
from ..config.loading.paths import found_state_directory
from ..config.tables.model import CONFIG_ERROR, Config, ConfigError
from ..registry.profiles.unmatched import unmatched
from ..registry.tables.catalog import Catalog

logger = logging.getLogger("mcpd")


@dataclass(frozen=True)
class Reread:
    config: Config  # to put in force, with the socket listening now
    restart: list[str]  # the keys changed that take a restart, not a reload
    settings: list[str]  # the rest of what changed but the servers: in force now
    new_connections: list[str]  # keys changed that the connections opened from now take


class Rereader:
    def __init__(
        self,
        path: str | None,
        started_with: Config,
        catalog: Catalog,
        socket_for: Callable[[Config], str],
    ) -> None:
        """``path`` is the config file (None: there is none to read again);
        ``socket_for`` says where a restart with a config would listen."""
        self.path = path
        self._catalog = catalog
        self._socket_for = socket_for
        # The keys that take a restart as mcpd started with them: a reload compares
        # with these, not with the config it read last, which may itself be waiting.
        started = msgspec.structs.asdict(started_with.daemon)
        self._at_start = {key: started[key] for key in AT_START}
        self._at_start["state_dir"] = found_state_directory(started_with.daemon.state_dir)

    def read(self, running: Config, socket: str) -> Reread:
        """The file again, judged against ``running``, the config in force; raises
        ``rpc.RPCError`` when it is refused. ``socket`` is where mcpd listens now."""
        if self.path is None:
            raise rpc.RPCError(-32000, "mcpd was started without a config file to re-read")
        try:
            new = load(self.path)
            problem = unmatched_profile(new, self._catalog, running)
            if problem is not None:
                raise problem
        except ConfigError as exc:
            raise reload_refusal(exc) from None
        restart = []
        if self._socket_for(new) != socket:
            restart.append("daemon.socket")
        now = msgspec.structs.asdict(new.daemon)
        now["state_dir"] = found_state_directory(new.daemon.state_dir)
        restart.extend(f"daemon.{key}" for key, was in self._at_start.items() if now[key] != was)
        for key in restart:
            logger.warning(
                "%s changed; that takes a restart, not a reload",
                key,
                extra=log_extra(None, "reload"),
            )
        # The socket listening now, and the state directory mcpd keeps, are what every
        # server's sandbox must hide, and where the servers' homes are.
        new = msgspec.structs.replace(
            new,
            state_path=running.state_path,
            daemon=msgspec.structs.replace(
                new.daemon, socket=socket, state_dir=running.daemon.state_dir
            ),
        )
        settings = changed_settings(running, new)
        later = [key for key in settings if key in ON_NEW_CONNECTIONS]
        at_once = [key for key in settings if key not in ON_NEW_CONNECTIONS]
        return Reread(new, restart, at_once, later)


def reload_refusal(exc: ConfigError) -> rpc.RPCError:
    """The reload refused whole for ``exc``, logged: the running configuration stays."""
    logger.error(
        "reload rejected, keeping the running configuration: %s",
        exc,
        extra=log_extra(None, "reload", str(exc)),
    )
    # The data lets `mcpd reload` exit as every config error does (78).
    return rpc.RPCError(-32000, f"config rejected: {exc}", {CONFIG_ERROR: str(exc)})


def reload_fault(exc: Exception) -> None:
    """A reload that failed on what nothing expected, logged with its traceback: a
    fault in mcpd, which ends that reload and leaves the daemon serving."""
    logger.error(
        "reload failed (%s): a fault in mcpd; serving on with what is in force",
        kind_of(exc),
        exc_info=exc,
        extra=log_extra(None, "reload", f"reload failed: {kind_of(exc)}"),
    )


# Daemon keys read once, as mcpd starts: the socket's mode, the endpoint (and whom it
# lets in) and where mcpd keeps its state. The socket itself is apart: where it is
# comes from more than its key.
AT_START = ("socket_mode", "http_listen", "http_allow_remote", "http_origins", "state_dir")
# Daemon keys a connection reads as it opens, an agent's or a server's (which opens
# one each time it starts): a connection open keeps its own, and a bridge has been told
# the line limit already, so a reload puts them in force for the next ones alone.
ON_NEW_CONNECTIONS = frozenset({"daemon.max_line_bytes", "daemon.max_inflight_per_connection"})
# What a reload reads but no person wrote as a setting of its own: the file's name and
# what mcpd worked out from it (the servers are reported by name on their own).
_NOT_SETTINGS = frozenset(
    {"servers", "source", "state_path", "variables", "secret_files", "held_secrets"}
)


def changed_settings(running: Config, new: Config) -> list[str]:
    """The sections (``profiles``, ``policy``, ``naming``) and ``daemon`` keys that
    differ between ``running`` and ``new``, but those only a restart puts in force."""
    out: list[str] = []
    old_sections, new_sections = msgspec.structs.asdict(running), msgspec.structs.asdict(new)
    for name in old_sections:
        if name in _NOT_SETTINGS or old_sections[name] == new_sections[name]:
            continue
        if name != "daemon":
            out.append(name)
            continue
        old_keys = msgspec.structs.asdict(running.daemon)
        new_keys = msgspec.structs.asdict(new.daemon)
        out.extend(
            f"daemon.{key}"
            for key in old_keys
            if old_keys[key] != new_keys[key] and key != "socket" and key not in AT_START
        )
    return out


def unmatched_profile(
    new: Config, catalog: Catalog, old: Config | None = None
) -> ConfigError | None:
    """A profile of ``new`` that matches no tool, judged by the tools listed now;
    servers that a reload (from ``old``) adds or changes are not judged yet."""
    if not new.profiles:
        return None
    enabled = [a for a, c in new.servers.items() if c.enabled]
    unknown = [
        a for a in enabled if old is None or old.servers.get(a) != new.servers[a]
    ] if old is not None else []  # fmt: skip
    return unmatched(new.profiles, catalog, new.naming, enabled, unknown)
