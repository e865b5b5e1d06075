"""``mcpd serve`` starts its stdio servers before it imports the event loop.

Importing trio and the rest of the daemon takes CPU time before the first server
could be spawned, and a server's own start-up (an interpreter, ``npx``) is
usually what an agent waits for. So the servers the daemon will start first are
started as soon as the config is read; each runner's first start takes its own
(``transports.stdio.process.early``), and whatever no runner took is stopped once the daemon is up.

Every socket agents reach mcpd on is bound first (``listening``): a server started
before could take the HTTP endpoint's port or a socket's place. A socket mcpd cannot
bind (another daemon's, a port in use) stops it before any server has started.

No trio here, and nothing that imports it.
"""

from __future__ import annotations

import logging
import os

import msgspec

from transports.stdio.process import early
from transports.stdio.sandbox.host import command_line
from transports.stdio.sandbox.plan import SandboxError

from ..config.loading.paths import (
    daemon_socket_path,
    found_state_directory,
    state_directory,
    systemd_socket,
)
from ..config.sandboxing.per_server import child_env, sandbox_of
from ..config.tables.model import Config
from ..local.state.statedir import ready_state_directory
from ..local.state.statelock import hold_state_directory
from .listening import Listening

logger = logging.getLogger("mcpd")


def state_found(config: Config) -> Config:
    """``config`` with its state directory as the daemon keeps it (``found_state_directory``),
    and as it was named (``Config.state_path``), kept from the first time. The directory
    is made private first, and refused (``UnsafeStateDirectory``) where another user
    could read or change it; then this daemon's alone (``StateDirectoryInUse`` where
    another daemon has it)."""
    ready_state_directory(state_directory(config.daemon.state_dir))
    found = found_state_directory(config.daemon.state_dir)
    hold_state_directory(found)
    return msgspec.structs.replace(
        config,
        state_path=config.state_path or state_directory(config.daemon.state_dir),
        daemon=msgspec.structs.replace(config.daemon, state_dir=found),
    )


def bind_first(config: Config, socket: str | None) -> Listening:
    """Every socket of ``config`` bound, but the agents' socket when systemd passes
    it (the daemon adopts that one); raises ``DaemonError`` naming what failed."""
    activated = os.environ.get("LISTEN_PID") == str(os.getpid()) and os.environ.get("LISTEN_FDS")
    listening = Listening()
    listening.bind(config, None if activated else _socket_path(config, socket))
    return listening


def start_early(config: Config, socket: str | None) -> list[int]:
    """Start every enabled stdio server that starts with the daemon; their pids. Only
    once ``bind_first`` has bound the daemon's sockets."""
    path = _socket_path(config, socket)
    # What the servers' sandboxes hide is decided with the socket the daemon will use.
    config = msgspec.structs.replace(
        config, daemon=msgspec.structs.replace(config.daemon, socket=path)
    )
    pids = []
    for alias, cfg in config.servers.items():
        if not cfg.enabled or cfg.unresolved or cfg.start == "lazy" or cfg.command is None:
            continue
        try:
            sandbox = sandbox_of(alias, cfg, config)
            env = child_env(alias, cfg, config, sandbox)
            plan, cwd = command_line([cfg.command, *cfg.args], env, cfg.cwd, sandbox)
            pid = early.launch_early(
                plan.argv, env, cwd, plan.join, plan.starter, plan.sandbox_args, plan.held
            )
        except (OSError, SandboxError):
            continue  # its runner starts it again, and says by name why it cannot
        except Exception as exc:
            # Not foreseen, and about this server alone: its runner starts it again and
            # fails on its own, while the daemon and every other server start.
            logger.warning("%s: not started ahead of the daemon: %r", alias, exc)
            continue
        logger.debug("%s: started early (pid %d)", alias, pid)
        pids.append(pid)
    return pids


def stop_unclaimed() -> None:
    """Once every runner had its first start: stop what none of them took."""
    for pid in early.discard():
        # A start that did not match what was started early: harmless (it started its
        # own), but the early one was started for nothing.
        logger.warning("a server started early (pid %d) was not used and is stopped", pid)


def undo(listening: Listening) -> None:
    """What ``bind_first`` and ``start_early`` did, undone: for a stop that comes before
    the daemon's loop, which would otherwise leave the socket files and the servers
    started early behind it."""
    early.discard()
    listening.close()


def _socket_path(config: Config, socket: str | None) -> str:
    # The daemon's own rule, with systemd's variables still in the environment.
    return daemon_socket_path(socket, config.daemon.socket, systemd=systemd_socket())
