"""``mcpd serve`` starts its stdio servers before it imports the event loop.

Importing trio and the rest of the daemon takes CPU time before the first server
could be spawned, and a server's own start-up (an interpreter, ``npx``) is
usually what an agent waits for. So the servers the daemon will start first are
started as soon as the config is read; each runner's first start takes its own
(``transports.stdio.early``), and whatever no runner took is stopped once the daemon is up.

Nothing is started early when another daemon already listens on the socket: this
one is about to exit, and its servers would only run beside that daemon's.

No trio here, and nothing that imports it.
"""

from __future__ import annotations

import logging
import os
import socket as stdsocket

import msgspec

from transports.stdio import early
from transports.stdio.sandbox import SandboxError
from transports.stdio.sandbox_host import command_line

from .config.model import Config
from .config.paths import daemon_socket_path, runtime_directory
from .config.sandbox import child_env, sandbox_of

logger = logging.getLogger("mcpd")


def start_early(config: Config, socket: str | None) -> list[int]:
    """Start every enabled stdio server that starts with the daemon; their pids."""
    # The daemon's own rule, with systemd's variables still in the environment.
    path = daemon_socket_path(socket, config.daemon.socket, runtime_dir=runtime_directory())
    if _taken(path):
        return []
    # What the servers' sandboxes hide is decided with the socket the daemon will use.
    config = msgspec.structs.replace(
        config, daemon=msgspec.structs.replace(config.daemon, socket=path)
    )
    pids = []
    for alias, cfg in config.servers.items():
        if not cfg.enabled or cfg.unresolved or cfg.start == "lazy" or cfg.command is None:
            continue
        sandbox = sandbox_of(alias, cfg, config)
        env = child_env(alias, cfg, config, sandbox)
        try:
            plan, cwd = command_line([cfg.command, *cfg.args], env, cfg.cwd, sandbox)
            pid = early.launch_early(plan.argv, env, cwd, plan.join)
        except (OSError, SandboxError):
            continue  # its runner starts it again, and says by name why it cannot
        logger.debug("%s: started early (pid %d)", alias, pid)
        pids.append(pid)
    return pids


def stop_unclaimed() -> None:
    """Once every runner had its first start: stop what none of them took."""
    for pid in early.discard():
        # A start that did not match what was started early: harmless (it started its
        # own), but the early one was started for nothing.
        logger.warning("a server started early (pid %d) was not used and is stopped", pid)


def _taken(path: str) -> bool:
    """Whether another daemon listens on ``path`` (systemd's socket is ours)."""
    if os.environ.get("LISTEN_PID") == str(os.getpid()):
        return False
    probe = stdsocket.socket(stdsocket.AF_UNIX, stdsocket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except TimeoutError:
        return True  # bound and listening, with a full backlog
    except OSError:
        return False  # no file, or a stale one
    finally:
        probe.close()
    return True
