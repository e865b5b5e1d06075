"""Each stdio server's sandbox, home, limits and provided variables, from the config.

What is hidden from every server (at the default and the strict level alike):

- mcpd's state directory (the endpoint token, OAuth tokens, persisted lists, and the
  servers' homes, of which each server gets its own back);
- its config file and the secret files the config reads, and the whole config
  directory when it is mcpd's own (named ``mcpd``: ``/etc/mcpd``, ``~/.config/mcpd``) or
  systemd's ConfigurationDirectory=;
- the directories of its sockets when they are mcpd's own (``/run/mcpd``,
  ``$XDG_RUNTIME_DIR/mcpd``, ``/tmp/mcpd-UID``), systemd's RuntimeDirectory= and
  ``$CREDENTIALS_DIRECTORY``;
- the directory of the pages ``mcpd dashboard`` and ``mcpd auth login`` hand a
  browser (``config.loading.paths.pages_directories``), which carry a one-time code or a
  login's state: made as a server starts when missing, since only what exists then
  can be hidden;
- the user's credential stores, and the sockets through which a process could act as
  the user, or as root, outside its sandbox (``credstores``).

A server's home is ``homes/ALIAS`` in the state directory, and its working directory
unless ``cwd`` says otherwise. Outside the strict level, the npm and uv caches stay
the user's, where the server sees them, so a package downloaded once serves every
server; a strict server, and one from whom the user's caches are hidden (the system
service's user has its home in the state directory), keeps its own in its home: a
cache servers share is one where each could plant what another's ``npx`` runs.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import resource
import urllib.parse
from collections.abc import Mapping
from typing import Final

import msgspec

from transports.stdio.process.childenv import environment
from transports.stdio.sandbox.host import probe
from transports.stdio.sandbox.limits import LIMIT_NAMES, Limits
from transports.stdio.sandbox.plan import (
    Level,
    Mount,
    Sandbox,
    SandboxError,
    SeenPlace,
    shortfall,
    within,
)

from ...server_row import SandboxStatus
from ..loading.paths import pages_directories, state_directory
from ..tables.model import Config
from ..tables.servertable import DEFAULT_LIMITS, ServerConfig
from . import state_links
from .credstores import (
    BUS_NAMED_BY,
    IN_DIR_NAMED_BY,
    IN_HOME,
    IN_RUNTIME_DIR,
    IN_TMP,
    NAMED_BY,
    ON_HOST,
)
from .keys import loopback_port, parse_size

HOMES: Final = "homes"


def level_of(cfg: ServerConfig, config: Config) -> Level:
    return cfg.sandbox or config.daemon.sandbox


def limits_of(alias: str, cfg: ServerConfig, config: Config) -> Limits:
    """The server's limits: each its own, else the daemon's, else the default; 0 is none."""
    values: dict[str, int | None] = {}
    keys: dict[str, str] = {}
    own, daemon, default = (
        msgspec.structs.asdict(limits)
        for limits in (cfg.limits, config.daemon.limits, DEFAULT_LIMITS)
    )
    for name in LIMIT_NAMES:
        value = own[name]
        keys[name] = f"servers.{alias}.limits.{name}"
        if value is None:
            value = daemon[name]
            keys[name] = f"daemon.limits.{name}"
        if value is None:
            value = default[name]
        if isinstance(value, str):
            value = parse_size(value)
        values[name] = value or None
    return Limits(**values, keys=keys)


def home_of(alias: str, config: Config, env: Mapping[str, str] | None = None) -> str:
    return os.path.join(state_directory(config.daemon.state_dir, env), HOMES, alias)


def user_homes(env: Mapping[str, str]) -> list[str]:
    homes = []
    with contextlib.suppress(KeyError):
        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
    if env.get("HOME") and env["HOME"] not in homes:
        homes.append(env["HOME"])
    return [h for h in homes if h and h != "/"]


def _owned_dir(path: str) -> bool:
    """Whether a directory is mcpd's own: named for it, or its default socket's."""
    path = os.path.normpath(path)
    return os.path.basename(path) == "mcpd" or path == f"/tmp/mcpd-{os.getuid()}"


def own_paths(config: Config, env: Mapping[str, str] | None = None) -> list[str]:
    """What of ``hidden_paths`` is mcpd's own: its state directory (and the servers'
    homes in it), its config file and directory, the secret files the config reads,
    the directories of its sockets and of the pages it hands a browser, and systemd's
    directories for it. No grant shows a server any of them (``grant_reach``)."""
    env = os.environ if env is None else env
    out = [state_directory(config.daemon.state_dir, env)]
    if config.source:  # none for a config read from no file
        out.append(config.source)
        folder = os.path.dirname(_absolute(config.source))
        if _owned_dir(folder):
            out.append(folder)
    out += [f if os.path.isabs(f) else os.path.join(env.get("CREDENTIALS_DIRECTORY", "/"), f)
            for f in config.secret_files]  # fmt: skip
    # A socket elsewhere is not hidden: a mount needs what it covers to exist, and a
    # profile's socket a reload adds comes after its servers. It refuses servers anyway.
    sockets = [config.socket_path()] + [p.socket for p in config.profiles.values() if p.socket]
    out += [os.path.dirname(s) for s in sockets if _owned_dir(os.path.dirname(s))]
    for var in ("CONFIGURATION_DIRECTORY", "RUNTIME_DIRECTORY", "CREDENTIALS_DIRECTORY"):
        out += [p for p in env.get(var, "").split(":") if p]
    out += pages_directories(env)
    return sorted({_absolute(p) for p in out})


def hidden_paths(config: Config, env: Mapping[str, str] | None = None) -> list[str]:
    """Every path no server may see (they may not exist), absolute: one named
    relatively, in the config or mcpd's environment, is where mcpd finds it, relative to
    its working directory, which it never leaves."""
    env = os.environ if env is None else env
    out = own_paths(config, env)
    for home in user_homes(env):
        out += [os.path.join(home, p) for p in IN_HOME]
    # The session's sockets are where the login made them, whatever mcpd was told.
    runtimes = {env.get("XDG_RUNTIME_DIR") or "", f"/run/user/{os.getuid()}"} - {""}
    names = {"uid": str(os.getuid()), "user": env.get("USER") or env.get("LOGNAME") or ""}
    out += [os.path.join(r, p.format_map(names)) for r in runtimes for p in IN_RUNTIME_DIR]
    out += [os.path.join("/tmp", p.format_map(names)) for p in IN_TMP]
    out += ON_HOST
    for var in NAMED_BY:
        out += [p for p in env.get(var, "").split(":") if p]
    for var, name in IN_DIR_NAMED_BY:
        if env.get(var):
            out.append(os.path.join(env[var], name))
    for var in BUS_NAMED_BY:
        out += bus_paths(env.get(var, ""))
    return sorted({_absolute(p) for p in out})


def bus_paths(address: str) -> list[str]:
    """The socket paths a D-Bus address names (``unix:path=/tmp/dbus-x,guid=...``,
    several separated by ``;``, bytes other than letters, digits and ``-_/.\\*``
    written as ``%XX``); an abstract socket has none (``landlock`` keeps servers
    from it)."""
    found = []
    for one in address.split(";"):
        transport, _, keys = one.partition(":")
        if transport != "unix":
            continue
        for key, _, value in (k.partition("=") for k in keys.split(",")):
            if key == "path" and value:
                found.append(urllib.parse.unquote_to_bytes(value).decode("utf-8", "replace"))
    return found


def secrets_of(config: Config, env: Mapping[str, str]) -> tuple[str, ...]:
    """The config file and the secret files it reads, absolute, but those in a directory
    hidden whole from every server already (mcpd's own, the credentials directory)."""
    out = []
    source = _absolute(config.source) if config.source else ""
    # A config file linked from mcpd's directory into another (dotfiles kept in one
    # place) lies, and is rewritten, in that other one.
    if source and not all(
        _owned_dir(os.path.dirname(p)) for p in (source, os.path.realpath(source))
    ):
        out.append(source)
    out += [_absolute(f) for f in config.secret_files if os.path.isabs(f)]
    return tuple(dict.fromkeys(out))


def sees_of(alias: str, cfg: ServerConfig, env: Mapping[str, str]) -> tuple[SeenPlace, ...]:
    """What the server sees whatever is hidden, beyond its command, working directory
    and grants: the user's home, and the paths its arguments and environment name (a
    script beside the config file)."""
    out = [SeenPlace(h, "the user's home") for h in user_homes(env)]
    for i, arg in enumerate(cfg.args):
        for path in (arg, arg.partition("=")[2]):
            if _names_path(path):
                out.append(SeenPlace(_grant(path, env), f"a path servers.{alias}.args[{i}] names"))
    # A value of its environment may name a path, or a list of them (PYTHONPATH); only
    # one that exists is taken as a path, as a value may be a secret's, never to be said.
    for key, value in cfg.env.items():
        for path in value.split(":"):
            if _names_path(path) and os.path.lexists(_grant(path, env)):
                out.append(SeenPlace(_grant(path, env), f"a path servers.{alias}.env.{key} names"))
    return tuple(out)


def _names_path(text: str) -> bool:
    return text.startswith("/") or text.startswith("~/")


def _absolute(path: str) -> str:
    # Not normalized: "link/.." is where the link's target's parent is, as the kernel
    # finds it when the sandbox is made.
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)


def _grant(path: str, env: Mapping[str, str]) -> str:
    if path == "~" or path.startswith("~/"):
        return env.get("HOME", "/") + path[1:]
    return path


def sandbox_of(
    alias: str, cfg: ServerConfig, config: Config, env: Mapping[str, str] | None = None
) -> Sandbox:
    env = os.environ if env is None else env
    level = level_of(cfg, config)
    home = home_of(alias, config, env)
    hide = tuple(hidden_paths(config, env))
    read = tuple(_grant(p, env) for p in cfg.read)
    write = tuple(_grant(p, env) for p in cfg.write)
    return Sandbox(
        level=level,
        home=home,
        hide=hide,
        own=tuple(own_paths(config, env)),
        made=tuple(pages_directories(env)),
        secrets=secrets_of(config, env),
        sees=sees_of(alias, cfg, env),
        read=read,
        write=write,
        network=cfg.network,
        loopback=tuple(loopback_port(p) for p in cfg.host_loopback),
        limits=limits_of(alias, cfg, config),
        alias=alias,
        where=f"servers.{alias}",
        refused=_refused(config, env, level, state_links.view(level, home, hide, read, write)),
    )


def _refused(
    config: Config, env: Mapping[str, str], level: Level, shown: list[Mount]
) -> str | None:
    """Why the server may not start: a link on the way to what mcpd keeps that it
    could repoint (``state_links``)."""
    named = config.state_path or state_directory(config.daemon.state_dir, env)
    paths = {"state_dir": _absolute(named)}
    if config.source:
        paths["config"] = _absolute(config.source)
    for name, link in state_links.exposed(paths, level, shown):
        return state_links.link_refusal(name, paths[name], link, level)
    return None


def provided_env(
    sandbox: Sandbox, config: Config, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """What mcpd sets in a server's environment: its own HOME, and where the package
    caches are: the user's, where the server sees them; else (a strict server, or the
    user's caches hidden, as the service's are in its state directory) its own, in its
    home, where no other server can put a package for it to run."""
    env = os.environ if env is None else env
    out = {"HOME": sandbox.home}
    own = {
        "npm_config_cache": os.path.join(sandbox.home, ".npm"),
        "UV_CACHE_DIR": os.path.join(sandbox.home, ".cache", "uv"),
    }
    if sandbox.level == "strict":
        return out | own
    hide = [] if sandbox.level == "off" else sandbox.hide
    homes = user_homes(env)
    user_home = homes[-1] if homes else sandbox.home
    cache_home = env.get("XDG_CACHE_HOME") or os.path.join(user_home, ".cache")
    for name, usual in (
        ("npm_config_cache", os.path.join(user_home, ".npm")),
        ("UV_CACHE_DIR", os.path.join(cache_home, "uv")),
    ):
        if env.get(name):
            continue  # inherited as it is (the default set has it)
        out[name] = own[name] if any(within(usual, h) for h in hide) else usual
    return out


def inherit_of(cfg: ServerConfig) -> bool | tuple[str, ...]:
    return cfg.inherit_env if isinstance(cfg.inherit_env, bool) else tuple(cfg.inherit_env)


def child_env(
    alias: str,
    cfg: ServerConfig,
    config: Config,
    sandbox: Sandbox,
    env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The server's whole environment, as its start builds it."""
    env = os.environ if env is None else env
    return environment(
        inherit_of(cfg),
        cfg.env or None,
        env,
        withheld=config.withheld_from(alias),
        provided=provided_env(sandbox, config, env),
    )


def expected_shortfall(sandbox: Sandbox) -> str | None:
    """What of the sandbox a start would not apply on this machine, and why."""
    try:
        return shortfall(sandbox, probe(network=not sandbox.network))
    except SandboxError as exc:
        return f"the server cannot start: {exc}"


def sandbox_status(sandbox: Sandbox, unprotected: str | None, started: bool) -> SandboxStatus:
    """A server's sandbox as ``mcpd status --json`` shows it: ``unprotected`` is what its
    last start could not apply (when ``started``)."""
    if not started:
        unprotected = expected_shortfall(sandbox)
    return SandboxStatus(
        level=sandbox.level,
        unprotected=unprotected,
        home=sandbox.home,
        read=list(sandbox.read),
        write=list(sandbox.write),
        network=sandbox.network,
        host_loopback=list(sandbox.loopback),
        limits=applied_limits(sandbox.limits),
    )


def applied_limits(limits: Limits) -> dict[str, int | None]:
    """``limits`` as a start applies them: a child cannot be let open more files than
    mcpd itself may."""
    values = limits.values()
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    open_files = values["open_files"]
    if open_files is not None and hard != resource.RLIM_INFINITY:
        values["open_files"] = min(open_files, hard)
    return values
