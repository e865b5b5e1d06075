"""``mcpd serve``, ``mcpd check-config``, ``mcpd import`` and ``mcpd token``: the
commands that work from the config file and the files it names, not through the
daemon's socket.

They read (or, for ``import``, write) configuration here and now, so they work
whether a daemon runs or not, and a config error stops them with ``EX_CONFIG``.
The commands that ask the running daemon are in ``client_cmds``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from protocol.shown.server_urls import display_url
from protocol.shown.stand_ins import masked, masking
from protocol.shown.visible import visible

from ..config.checks.aliases import alias_warnings
from ..config.checks.held_args import secrets_in_args
from ..config.checks.policy_rules import leavable
from ..config.checks.servers import plain_http_credentials, unpinned_client
from ..config.checks.socket_access import access_warnings
from ..config.checks.strings import socket_path_error
from ..config.credentials import exposure
from ..config.credentials.exposure import in_url, masked_args, warnings
from ..config.loading.load import load, said_of
from ..config.loading.paths import SOCKET_VAR, daemon_socket_path, state_directory, systemd_socket
from ..config.tables.model import EX_CONFIG, Config, ConfigError, default_config_path
from ..config.tables.policy import PolicyRule, parse_rate, unreachable
from ..config.tables.profiles import socket_where
from ..local.state.statedir import state_directory_problem
from .exits import EXIT_UNREACHABLE, EXIT_USAGE, fail, fail_config
from .startable import changeable, unstartable_servers


def _load_config(path: str | None) -> tuple[Config, str]:
    path = path or default_config_path()
    try:
        return load(path), path
    except ConfigError as exc:
        fail_config(_config_error(exc, path))


def _config_error(exc: ConfigError, path: str) -> str:
    """What a command that needs the config file says of ``exc``; where there is no file
    at all, what else a newcomer can do."""
    said = f"config error: {exc}"
    if os.path.lexists(path):
        return said
    return (
        f"{said}: name another with --config (or $MCPD_CONFIG), write one from another "
        "host's with `mcpd import`, or try mcpd with `mcpd serve --demo`"
    )


def cmd_serve(args: argparse.Namespace) -> int:
    from ..local.service.logsetup import setup_logging

    setup_logging(args.log, args.log_level)
    unfit = _unfit_socket(args.socket)
    if unfit is not None:
        logging.getLogger("mcpd").error("config error: %s", unfit)
        return EX_CONFIG
    if args.demo:
        config_path = None
        config = None
    else:
        config_path = args.config or default_config_path()
        try:
            config = load(config_path)
        except ConfigError as exc:
            # Through the log, not a bare print: under systemd this is why the
            # service failed, and `journalctl -p err -u mcpd` must show it.
            logging.getLogger("mcpd").error("%s", _config_error(exc, config_path))
            if not _socket_activated():
                return EX_CONFIG
            from ..starting.serve import serve

            # Exiting would only have systemd start mcpd again for the connection
            # waiting on its socket: see ``starting.config_hold``.
            path = os.path.abspath(config_path)
            return serve(None, path, demo=False, socket=args.socket, config_error=exc)
        # Before ``..starting.serve`` imports trio and the daemon: see ``starting.prestart``.
        from ..starting.cannot_start import DaemonError
        from ..starting.prestart import bind_first, start_early, state_found, undo

        try:
            config = state_found(config)
            listening = bind_first(config, args.socket)
        except DaemonError as exc:
            logging.getLogger("mcpd").error("%s", exc)
            return exc.exit_code
        try:
            start_early(config, args.socket)
            # Absolute: the daemon reports it, and `mcpd token` and `mcpd connect` run
            # elsewhere act on it.
            config_path = config.source
            from ..starting.serve import serve

            return serve(config, config_path, demo=False, socket=args.socket, listening=listening)
        except KeyboardInterrupt:
            # Ctrl-C before the daemon hears signals (it reads trio in the meantime).
            logging.getLogger("mcpd").info("stopping before the start was done")
            raise
        finally:
            undo(listening)
    from ..starting.serve import serve

    return serve(config, config_path, demo=args.demo, socket=args.socket)


def _unfit_socket(flag: str | None) -> ConfigError | None:
    """Why the socket ``--socket`` or ``$MCPD_SOCKET`` gives cannot be listened on:
    refused before anything starts, as such a ``[daemon] socket`` is (relative, it
    would be found only from this working directory; too long, the kernel could not
    bind it)."""
    if flag:
        return socket_path_error(f"--socket {visible(flag)}", flag)
    given = os.environ.get(SOCKET_VAR)
    return socket_path_error(f"${SOCKET_VAR} {visible(given)}", given) if given else None


def _socket_activated() -> bool:
    return os.environ.get("LISTEN_PID") == str(os.getpid()) and bool(os.environ.get("LISTEN_FDS"))


def cmd_check_config(args: argparse.Namespace) -> int:
    config, path = _load_config(args.config)
    # What it says of the config shows no value a reference gave, as the config's
    # errors show none: the same terminals and logs read both.
    with masking(said_of(config)):
        return _check_config(config, path)


def _say(line: str, err: bool = False) -> None:
    """``line`` as check-config prints anything: each value in force written as its
    reference, then what would act on the terminal escaped."""
    print(visible(masked(line)), file=sys.stderr if err else sys.stdout)


def _check_config(config: Config, path: str) -> int:
    from .check_sandbox import (
        exposed_warnings,
        inherited_warnings,
        sandbox_lines,
        unscoped_warnings,
    )

    # As ``mcpd serve`` would refuse it, and before any advice that names a place in it.
    unsafe = state_directory_problem(state_directory(config.daemon.state_dir))
    if unsafe is not None:
        fail(EX_CONFIG, masked(f"{path}: {unsafe}"))
    socket = daemon_socket_path(None, config.daemon.socket, systemd=systemd_socket())
    _say(f"{path}: OK, {len(config.servers)} server(s); socket {socket}")
    unstartable = unstartable_servers(config)
    exposed: list[str] = []
    for alias, s in sorted(config.servers.items()):
        exposed += warnings(alias, s.args, s.url, s.command)
        # Secrets in them are shown masked: this output ends up in terminals and logs.
        # A URL as everything shows one: its path masked, no user info, query or fragment.
        if s.command:
            where = f"{s.command} {' '.join(masked_args(s.args, s.command))}".strip()
        else:
            where = display_url(exposure.masked_secrets(s.url or "", in_url(s.url or "")))
        flags: list[str] = [s.kind]
        if s.trusted:
            flags.append("trusted")
        if not s.enabled:
            flags.append("disabled")
        elif alias in unstartable:
            flags.append("cannot start")
        if s.start == "lazy":
            flags.append("lazy")
        if s.auth is not None:
            flags.append(s.auth.type.replace("_", " "))
        # A config imported from another host's file may hold anything: a carriage
        # return in a command could show another command than the one that runs.
        _say(f"  {alias:<20} {', '.join(flags):<16} {where}")
        if s.command is not None:
            for line in sandbox_lines(alias, s, config):
                _say(f"  {'':<20} {line}")
    if config.policy:
        _say(f"policy: {len(config.policy)} rule(s), the first that matches a call decides")
        for i, rule in enumerate(config.policy):
            _say(f"  policy[{i}]  {rule.action:<5}  {rule_words(rule)}")
        _say("  each tool's decision: mcpd tools --policy (with the daemon running)")
    patterned = [n for n, p in sorted(config.profiles.items()) if p.tools.allow or p.pinned]
    if patterned:
        # What the servers list is known only once they run: said, so an OK here is not
        # taken to cover a pattern that matches nothing.
        _say(
            f"profiles {', '.join(patterned)}: their tool patterns are checked when their "
            "servers list their tools (by mcpd serve, and at each reload)"
        )
    warned = [w for ws in unstartable.values() for w in ws]
    warned += _access_warnings(config, socket)
    warned += exposed
    warned += [w for _, w in secrets_in_args(config)]
    warned += [*unscoped_warnings(config), *exposed_warnings(config)]
    warned += changeable(config, unstartable)
    warned += [*inherited_warnings(config), *unreachable(config.policy), *leavable(config)]
    warned += [w for a, s in sorted(config.servers.items()) if (w := unpinned_client(a, s))]
    warned += [w for a, s in sorted(config.servers.items()) for w in plain_http_credentials(a, s)]
    warned += alias_warnings(config)
    for warning in warned:
        _say(f"warning: {warning}", err=True)
    return 0


def _access_warnings(config: Config, socket: str) -> list[str]:
    """Whom the sockets' modes, groups and directories keep out of those allowed on
    them, as ``mcpd serve`` warns of it when it binds them."""
    d = config.daemon
    out = access_warnings("daemon", socket, config.socket_mode(), d.allow_uids, d.allow_groups)
    for name, p in sorted(config.profiles.items()):
        if p.socket is not None:
            path, mode = socket_where(p)
            out += access_warnings(f"profiles.{name}", path, mode, p.allow_uids, p.allow_groups)
    return out


def rule_words(rule: PolicyRule) -> str:
    """What a rule is about and what it adds, in one line."""
    words = [f"tools {', '.join(rule.tools)}"]
    if rule.servers:
        words.append(f"servers {', '.join(rule.servers)}")
    if rule.profiles:
        words.append(f"profiles {', '.join(rule.profiles)}")
    if rule.annotations is not None:
        hints = rule.annotations.wanted().items()
        words.append("annotations " + ", ".join(f"{k}={str(v).lower()}" for k, v in hints))
    if rule.rate is not None:
        words.append(f"at most {parse_rate(rule.rate).words()} per agent")
    if rule.action == "ask":
        who = "by the operator only, " if rule.decider == "operator" else ""
        words.append(f"decided {who}within {rule.ask_timeout():g} s")
        if rule.remember == "connection":
            words.append("remembered for the connection")
    if rule.reason:
        words.append(f"reason: {rule.reason}")
    return "; ".join(words)


def cmd_import(args: argparse.Namespace) -> int:
    from ..config.importing.convert import import_file
    from ..config.importing.write import move_secrets, secrets_dir, to_toml
    from ..local.state.privatefile import UnsafeFileError, write_atomically
    from .hosts.import_sources import import_source, no_such_host, unread_host
    from .pins.outfile import resolved, taken

    unread = unread_host(args.path)
    if unread is not None:
        fail(EX_CONFIG, f"cannot import: {visible(unread)}")
    source = import_source(args.path)
    try:
        imported = import_file(source, named=source == args.path)
    except ConfigError as exc:
        fail(EX_CONFIG, f"cannot import: {visible(str(exc))}{no_such_host(args.path)}")
    moved = {}
    if args.output:
        # A link there counts, dangling or not: --force replaces the link, never the
        # file it points to.
        there = None if args.force else taken(args.output)
        if there is not None:
            fail(EXIT_USAGE, there)
        try:
            output = resolved(args.output)
            secrets_at = secrets_dir(output)
            moved = move_secrets(imported, secrets_at)
            # 0600, as the secrets: it names where they are and what mcpd runs.
            write_atomically(output, to_toml(imported, moved).encode("utf-8"))
        except UnsafeFileError as exc:
            fail(EXIT_USAGE, f"cannot write {args.output}: {exc}")
        except OSError as exc:
            why = exc.strerror or str(exc)
            fail(EXIT_USAGE, f"cannot write {exc.filename or args.output}: {why}")
    else:
        sys.stdout.write(to_toml(imported))
    extra = []
    if moved:
        extra.append(f"{len(moved)} secret(s) moved to {secrets_at}")
    elif imported.secrets or imported.inline:
        extra.append(f"{len(imported.secrets) + len(imported.inline)} secret(s) to provide")
    if imported.notes:
        extra.append(f"{len(imported.notes)} note(s)")
    # The host file's names and values show their hidden characters, as in the TOML.
    print(
        f"mcpd: imported {len(imported.servers)} server(s) from {visible(str(source))}"
        + (f"; {', '.join(extra)} (see the comments at the top)" if extra else ""),
        file=sys.stderr,
    )
    for where, path in moved.items():
        print(f"mcpd:   {visible('.'.join(where))} -> {path} (mode 0600)", file=sys.stderr)
    for warning in imported.exposed:
        print(f"mcpd: warning: {visible(warning)}", file=sys.stderr)
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    from ..local.state.endpoint_token import TokenError, stored_token, token_path, write_token
    from ..local.state.statefile import state_dir
    from .client import Untrusted, config_in_use

    try:
        path = config_in_use(args.config).path
    except Untrusted as exc:
        fail(EXIT_UNREACHABLE, str(exc))
    try:
        config = load(path)
    except ConfigError as exc:
        if args.config or os.path.exists(path):
            fail_config(f"config error: {exc}")
        config = Config()  # no config file: the default state directory
    where = token_path(state_dir(config))
    try:
        token = "" if args.rotate else stored_token(where)
        fresh = not token
        if fresh:
            token = write_token(where)
    except TokenError as exc:
        fail(EXIT_USAGE, str(exc))
    print(token)
    if args.rotate:
        print(f"mcpd: a new token is in {where}; the old one no longer works", file=sys.stderr)
    elif fresh:
        # Not silently: a token made in a state directory no daemon uses is refused by
        # the endpoint, and this line is what shows where it went.
        print(f"mcpd: there was no token yet; created {where}", file=sys.stderr)
    return 0
