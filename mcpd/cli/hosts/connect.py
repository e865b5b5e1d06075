"""``mcpd connect HOST``: the entry a host needs to reach mcpd, printed or merged in.

    mcpd connect claude-code              # print the entry
    mcpd connect claude-code --write      # merge it in, keeping a backup
    mcpd connect cursor --http --write    # the HTTP endpoint's URL and token instead
    mcpd connect vscode --profile dev     # another profile (printed too if it is new)

The entry runs the bridge (``mcpd bridge --socket S --profile P``) or, with ``--http``,
points at the HTTP endpoint (``http://127.0.0.1:PORT/mcp?profile=P``) with the
token in an ``Authorization`` header.

Hosts put their own prefix before each tool's name (Claude Code ``mcp__mcpd__``) and
cut names at 64 characters. For such a host mcpd connect uses the profile named after
it, which every daemon has, built in, unless its config defines one of that name
(``mcpd.config.tables.hosts``): so the entry works against any daemon, and nothing needs to
be added to mcpd's config. A host that adds no prefix gets the default profile.

A profile asked for with ``--profile`` that the config does not have is printed as a
table to add, and ``--write`` adds it, but only to the config file the daemon answering
on the socket was started with (or to the config in use when none answers): a file
that daemon does not read would change nothing, so that is refused, saying why.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from protocol.jsonrpc.messages import RPCError
from protocol.shown.visible import visible

from ...config.checks.endpoints import is_localhost
from ...config.loading.load import load
from ...config.loading.paths import daemon_socket_path
from ...config.tables.hosts import HOSTS, TEMPLATE, builtin_profiles, host_prefix, max_tool_name
from ...config.tables.model import Config, ConfigError
from ...config.tables.profiles import DEFAULT_PROFILE, EVERYTHING
from ...local.state.endpoint_token import TokenError, read_token, token_path
from ...status_document import StatusDocument
from ..client import (
    BadReply,
    Client,
    DaemonUnreachable,
    Running,
    Untrusted,
    config_in_use,
    config_in_use_help,
    running_daemon,
    socket_path,
)
from ..exits import EXIT_BAD_REPLY, EXIT_FAILED, EXIT_UNREACHABLE, fail
from .hostconfig import WouldDropComments, config_path, entry, host, merge, write_host_config
from .hostconfig_toml import merge_toml, render_table
from .hostfile import HostConfigError, Written, replace_file


class ConnectError(Exception):
    """Why ``mcpd connect`` cannot do what was asked; exit 2."""


def mcpd_command() -> list[str]:
    """How a host starts this very mcpd: an absolute path, so no PATH is needed."""
    beside = Path(sys.executable).with_name("mcpd")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("mcpd")
    return [os.path.abspath(found)] if found else [sys.executable, "-m", "mcpd"]


def profile_for(
    key: str, config: Config, name: str, asked: str | None
) -> tuple[str, dict[str, object] | None]:
    """The profile the host's entry uses, and the table to add when the daemon would not
    have it (neither the config nor mcpd itself defines it)."""
    prefix = host_prefix(key, name)
    chosen = asked or (key if prefix else DEFAULT_PROFILE)
    if chosen in (DEFAULT_PROFILE, *HOSTS) or chosen in config.profiles:
        return chosen, None
    body: dict[str, object] = {
        "servers": ["*"],
        "template": TEMPLATE,
        "max_length": max_tool_name(key, name),
    }
    cap = HOSTS[key].tool_cap
    if cap is not None:
        body["discovery"] = "auto"
        body["max_tools"] = cap
    return chosen, body


def fit_warning(key: str, config: Config, profile: str, name: str) -> str | None:
    """A note when an existing profile's names can be too long for the host (a built-in
    one's leave room for an entry named "mcpd")."""
    p = config.profiles.get(profile) or builtin_profiles(config.profiles).get(profile)
    if p is None and profile == DEFAULT_PROFILE:
        p = EVERYTHING
    longest = (p.max_length if p is not None else None) or config.naming.max_length
    room = max_tool_name(key, name)
    if longest <= room:
        return None
    return (
        f"profile {profile!r} allows names of {longest} characters; {host(key).title} "
        f"adds {host_prefix(key, name)!r} and passes on {host(key).max_name}: set "
        f"max_length = {room} in [profiles.{profile}] (and template = {TEMPLATE!r})"
    )


def endpoint_url(config: Config, sock: str) -> str:
    listen = config.daemon.http_listen
    if listen is None:
        raise ConnectError('no HTTP endpoint: set [daemon] http_listen = "127.0.0.1:PORT" first')
    address, _, port = listen.rpartition(":")
    if port == "0":  # chosen by the kernel: only the running daemon knows
        try:
            with Client(sock, timeout=10) as client:
                url = client.request_as("mcpd/status", StatusDocument).daemon.http
        except Untrusted:
            raise
        except (DaemonUnreachable, OSError) as exc:
            raise ConnectError(f"http_listen has port 0 and mcpd is not running: {exc}") from None
        except BadReply as exc:
            fail(EXIT_BAD_REPLY, str(exc))
        if not isinstance(url, str) or not url:
            raise ConnectError("the running mcpd has no HTTP endpoint (restart it to add one)")
        return url
    if is_localhost(address):
        # An address mcpd holds, not a name a host's resolver may take elsewhere.
        address = "127.0.0.1"
    return f"http://{address}:{port}/mcp"


def endpoint_warning(url: str, sock: str) -> str | None:
    """Why the endpoint ``url`` does not answer yet: the daemon on ``sock`` was started
    before ``http_listen`` named it, and only a restart opens it. None when no daemon
    answers (one started later opens it)."""
    try:
        with Client(sock, timeout=10) as client:
            served = client.request_as("mcpd/status", StatusDocument).daemon.http
    except Untrusted:
        raise
    except (DaemonUnreachable, OSError, BadReply, RPCError):
        return None
    if isinstance(served, str) and served.rpartition(":")[2] == url.rpartition(":")[2]:
        return None
    now = f"serves it at {served}" if isinstance(served, str) else "serves no HTTP endpoint"
    return (
        f"the mcpd answering on {sock} {now}, not {url}, until it restarts "
        "(http_listen takes a restart, not a reload)"
    )


def cmd_connect(args: argparse.Namespace) -> int:
    key, name = args.host, args.name
    try:
        host(key)
        in_use = config_in_use(args.config, args.socket)
        path = in_use.path
        try:
            config = load(path)
        except ConfigError as exc:
            if args.config or os.path.exists(path):
                raise ConnectError(f"config error: {exc}") from None
            config = Config()  # no config yet: the defaults
        # Where the running daemon answered, else where the daemon of this config listens.
        # Absolute: the host starts the bridge from a working directory of its own.
        sock = os.path.abspath(
            in_use.socket or daemon_socket_path(args.socket, config.daemon.socket, systemd=None)
        )
        profile, table = profile_for(key, config, name, args.profile)
        suffix = "" if profile == DEFAULT_PROFILE else profile
        if args.http:
            url = endpoint_url(config, sock)
            stale = endpoint_warning(url, sock)
            if stale:
                print(f"mcpd: warning: {visible(stale)}", file=sys.stderr)
            if suffix:
                url += f"?profile={suffix}"
            from ...local.state.statefile import state_dir  # trio: not for every command's parser

            token = read_token(token_path(state_dir(config)))
            new = entry(key, name=name, url=url, token=token)
        else:
            argv = [*mcpd_command(), "bridge", "--socket", sock]
            if suffix:
                argv += ["--profile", suffix]
            new = entry(key, name=name, bridge_argv=argv)
        target = Path(args.file) if args.file else config_path(key)
        warning = fit_warning(key, config, profile, name) if table is None else None
    except (HostConfigError, TokenError) as exc:
        raise ConnectError(str(exc)) from None
    if warning:
        print(f"mcpd: warning: {warning}", file=sys.stderr)
    if not args.write:
        print(f"# {host(key).title}: {target}")
        sys.stdout.write(merge(key, "", new))
        if table is not None:
            print(f"\n# mcpd's config ({path}): the profile this entry uses")
            sys.stdout.write(render_table("profiles", profile, table))
        return 0
    running = _daemon_reading(path, sock) if table is not None else None
    if table is not None:
        _write_profile(path, profile, table)
    try:
        written = write_host_config(key, target, new, secret=bool(args.http))
    except WouldDropComments as exc:
        # Not a usage error: the entry is right, and shown to be pasted.
        print(f"# {host(key).title}: {target}")
        sys.stdout.write(merge(key, "", new))
        fail(EXIT_FAILED, str(exc))
    except HostConfigError as exc:
        raise ConnectError(str(exc)) from None
    _report(written, host(key).title)
    if table is None:
        if profile != DEFAULT_PROFILE and profile not in config.profiles:
            print(f"mcpd: the profile {profile!r} is built in; mcpd's config is left as it is")
    elif running is not None:
        _reload(running.socket)
    else:
        print(f"mcpd is not running here; started with {path}, it has the new profile")
    return 0


def _daemon_reading(path: str, sock: str) -> Running | None:
    """The daemon answering on ``sock``, which must read ``path`` for a profile added
    there to reach it; None when no daemon answers."""
    running = running_daemon(sock)
    if running is None:
        return None
    if running.config is None:
        raise ConnectError(
            f"the mcpd answering on {sock} was started without a config file (as `mcpd "
            f"serve --demo` is): a profile written to {path} would not reach it, so nothing "
            "is written; start mcpd with --config FILE, or use a profile it has (the default, "
            "or the one named after the host)"
        )
    if os.path.realpath(running.config) != os.path.realpath(path):
        raise ConnectError(
            f"the mcpd answering on {sock} reads {running.config}, not {path}: a profile "
            f"written there would not reach it, so nothing is written; use --config "
            f"{running.config}"
        )
    return running


def _write_profile(path: str, profile: str, table: Mapping[str, object]) -> None:
    if path.endswith(".json"):
        raise ConnectError(
            f"{path} is another host's JSON file: add [profiles.{profile}] to a TOML config"
        )

    def change(before: str) -> str:
        try:
            return merge_toml(before, "profiles", profile, table)
        except ValueError as exc:
            raise HostConfigError(f"{path}: {exc}") from None

    try:
        written = replace_file(path, change)
    except HostConfigError as exc:
        raise ConnectError(str(exc)) from None
    _report(written, f"mcpd (profile {profile!r})")


def _report(written: Written, what: str) -> None:
    if written.tightened:
        print(
            f"{what}: {written.path} is now readable by its owner only: "
            "it holds mcpd's token, with which any profile and the whole of `mcpd status` "
            "can be read"
        )
    if not written.changed:
        print(f"{what}: {written.path} already has it")
        return
    kept = f" (the old file is {written.backup})" if written.backup else ""
    print(f"{what}: wrote {written.path}{kept}")


def _reload(sock: str) -> None:
    try:
        with Client(sock, timeout=60) as client:
            client.request("mcpd/reload")
    except Untrusted:
        raise
    except DaemonUnreachable:
        print("mcpd is not running here; it reads the new profile when it starts")
    except Exception as exc:  # a rejected reload: the daemon says why
        print(f"mcpd: the running daemon did not take the new profile: {exc}", file=sys.stderr)
    else:
        print("mcpd reloaded its configuration")


def add_connect(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    c = sub.add_parser("connect", help="print (or --write) the config entry a host needs")
    c.add_argument("host", choices=sorted(HOSTS), help="the host to connect")
    c.add_argument("--profile", help="the profile (default: the host's own, built in)")
    c.add_argument("--http", action="store_true", help="the HTTP endpoint instead of the bridge")
    c.add_argument("--write", action="store_true", help="merge into the files, keeping backups")
    c.add_argument("--name", default="mcpd", help="the entry's name in the host (default mcpd)")
    c.add_argument("--file", help="the host's config file (default: where the host reads it)")
    c.add_argument(
        "--config",
        help=f"mcpd's config (default: {config_in_use_help()})",
    )
    c.add_argument(
        "--socket",
        type=socket_path,
        help="the daemon's socket (default: the running daemon's, else the config's)",
    )
    c.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    try:
        return cmd_connect(args)
    except ConnectError as exc:
        # A config error says each of its errors on a line of its own; what the file
        # holds is shown escaped, as every command shows it.
        fail(2, str(exc), lines=True)
    except Untrusted as exc:
        print(f"mcpd: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
