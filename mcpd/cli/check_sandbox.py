"""What ``mcpd check-config`` says of each stdio server's sandbox: its level, grants,
network and limits, the names (never the values) of its environment beyond the default
set, what of the
sandbox this machine cannot apply, whether the kernel keeps sandboxed servers from the
host's abstract Unix sockets, the variables a server seems to rely on but no
longer inherits (``config.checks.envcheck``), and the secret files a running server could
come to read, in a directory that cannot be hidden from it (``secret_folders``)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from transports.stdio.process.childenv import in_default_set
from transports.stdio.process.exits import shown_limit
from transports.stdio.process.launch import server_program
from transports.stdio.sandbox import secret_folders
from transports.stdio.sandbox.host import probe
from transports.stdio.sandbox.limits import Limits

from ..config.checks.envcheck import relied_on
from ..config.sandboxing.per_server import applied_limits, child_env, expected_shortfall, sandbox_of
from ..config.tables.model import Config, default_config_path
from ..config.tables.servertable import ServerConfig


def sandbox_lines(
    alias: str, s: ServerConfig, config: Config, env: Mapping[str, str] | None = None
) -> list[str]:
    """The lines printed under a stdio server."""
    env = os.environ if env is None else env
    sandbox = sandbox_of(alias, s, config, env)
    parts = [f"sandbox {sandbox.level}"]
    if sandbox.read:
        parts.append(f"read {', '.join(sandbox.read)}")
    if sandbox.write:
        parts.append(f"write {', '.join(sandbox.write)}")
    parts.append("network" if sandbox.network else "no network")
    if sandbox.loopback:
        parts[-1] += f" but host loopback ports {', '.join(map(str, sandbox.loopback))}"
    parts.append(f"limits: {_limits_said(sandbox.limits)}")
    # The default set is the same for every server: named once, in the docs.
    names = sorted(n for n in child_env(alias, s, config, sandbox, env) if not in_default_set(n))
    base = "all of mcpd's environment" if s.inherit_env is True else "the default set"
    lines = ["; ".join(parts), f"env: {base}" + (f" + {', '.join(names)}" if names else "")]
    unprotected = expected_shortfall(sandbox) if s.enabled else None
    if unprotected is not None:
        lines.append(f"unprotected: {unprotected}")
    return lines


def _limits_said(limits: Limits) -> str:
    """The limits a start applies, as ``mcpd status`` shows them: a number of open files
    above what mcpd itself may open is lowered to that, and said to be."""
    asked = limits.values()
    said = []
    for name, value in applied_limits(limits).items():
        if value is None:
            continue
        said.append(f"{name.replace('_', ' ')} {shown_limit(name, value)}")
        if value != asked[name]:
            said[-1] += f" (the hard limit here; {asked[name]} configured)"
    return ", ".join(said) or "none"


def inherited_warnings(config: Config, env: Mapping[str, str] | None = None) -> list[str]:
    """One warning per variable a server seems to rely on and does not get."""
    env = os.environ if env is None else env
    out = []
    for alias, s in sorted(config.servers.items()):
        if not s.enabled:
            continue
        for name in relied_on(alias, s, env):
            out.append(
                f"servers.{alias}: {name} is set here but the server no longer inherits it; "
                f'if it needs it, add "{name}" to servers.{alias}.inherit_env'
            )
    return out


def unscoped_warnings(config: Config, env: Mapping[str, str] | None = None) -> list[str]:
    """One warning, naming the servers, when sandboxed servers that share the host's
    network can reach its abstract Unix sockets on this machine."""
    env = os.environ if env is None else env
    exposed = []
    for alias, s in sorted(config.servers.items()):
        if not s.enabled or s.command is None:
            continue
        sandbox = sandbox_of(alias, s, config, env)
        if sandbox.level != "off" and sandbox.network:
            exposed.append(alias)
    machine = probe()
    # Without bubblewrap there is no sandbox at all, which their own lines say.
    if not exposed or machine.bwrap is None or machine.namespaces is not None:
        return []
    why = machine.scoping
    if why is None:
        return []
    return [
        f"{', '.join(exposed)}: sandboxed, but can still connect to the host's abstract Unix "
        f"sockets (an X server's, a D-Bus bus at an abstract address): {why}"
    ]


def exposed_warnings(config: Config, env: Mapping[str, str] | None = None) -> list[str]:
    """One warning per secret file (or the config file) whose directory cannot be
    hidden from a sandboxed server, and why (``secret_folders``)."""
    env = os.environ if env is None else env
    out: list[str] = []
    for alias, s in sorted(config.servers.items()):
        if not s.enabled or s.command is None:
            continue
        sandbox = sandbox_of(alias, s, config, env)
        cwd = s.cwd or sandbox.home
        server_env = child_env(alias, s, config, sandbox, env)
        try:
            command = server_program(s.command, server_env, s.cwd, sandbox.home)
        except OSError:
            command = s.command  # as its start would say, which its line does
        for exposed in secret_folders.split_secrets(sandbox, command, cwd).exposed:
            if exposed.missing:
                continue
            said = secret_folders.warning(exposed, _remedy(exposed.file, config))
            out += [said] if said not in out else []
    return out


def _remedy(file: str, config: Config) -> str:
    """What to do of ``file``: a host's JSON file used as the config stays where its
    host keeps it (``~/.claude.json`` in the home), so what can be moved is a config
    written from it."""
    if file != config.source or not file.endswith(".json"):
        return secret_folders.KEEP_APART
    # Where mcpd looks when nothing names a config: not this file, which
    # $MCPD_CONFIG may name.
    elsewhere = default_config_path({k: v for k, v in os.environ.items() if k != "MCPD_CONFIG"})
    return (
        "this file is where its host keeps it, so give mcpd a config of its own, in a "
        f"directory of its own: mcpd import {file} -o {elsewhere}"
    )
