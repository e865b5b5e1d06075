"""``mcpd connect HOST``: the entry a host needs to reach mcpd, printed or merged in.

    mcpd connect claude-code              # print the entry (and the profile it needs)
    mcpd connect claude-code --write      # merge both in, keeping backups; reload mcpd
    mcpd connect cursor --http --write    # the HTTP endpoint's URL and token instead
    mcpd connect vscode --profile dev     # an existing profile

The entry runs the bridge (``mcpd bridge --socket S --profile P``) or, with ``--http``,
points at the HTTP endpoint (``http://127.0.0.1:PORT/mcp?profile=P``) with the
token in an ``Authorization`` header.

Hosts put their own prefix before each tool's name (Claude Code ``mcp__mcpd__``) and
cut names at 64 characters. For such a host mcpd connect uses the profile named after
it, and sets that profile up if the config has none: every server, names
``{alias}__{tool}`` with a length budget that leaves room for the host's prefix
(``mcp__mcpd__git__git_status`` through Claude Code), and ``discovery = "auto"`` under
the host's tool cap where it has one. A host that adds no prefix gets the default
profile.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from ..config.hosts import HOSTS, TEMPLATE, host_prefix, max_tool_name
from ..config.load import load
from ..config.model import Config, ConfigError
from ..config.paths import daemon_socket_path
from ..config.profiles import DEFAULT_PROFILE
from ..host.token import TokenError, read_token, token_path
from .client import Client, Unreachable, Untrusted, config_in_use, config_in_use_help
from .exits import EXIT_UNREACHABLE
from .hostconfig import (
    HostConfigError,
    Written,
    config_path,
    entry,
    host,
    merge,
    replace_file,
    write,
)
from .hostconfig_toml import merge_toml, render_table


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
) -> tuple[str, dict[str, Any] | None]:
    """The profile the host's entry uses, and the table to add if the config lacks it."""
    prefix = host_prefix(key, name)
    chosen = asked or (key if prefix else DEFAULT_PROFILE)
    if chosen == DEFAULT_PROFILE or chosen in config.profiles:
        return chosen, None
    body: dict[str, Any] = {
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
    """A note when an existing profile's names can be too long for the host."""
    p = config.profiles.get(profile)
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
                url = client.request("mcpd/status")["daemon"].get("http")
        except Untrusted:
            raise
        except (Unreachable, OSError) as exc:
            raise ConnectError(f"http_listen has port 0 and mcpd is not running: {exc}") from None
        if not url:
            raise ConnectError("the running mcpd has no HTTP endpoint (restart it to add one)")
        return str(url)
    return f"http://{address}:{port}/mcp"


def run(args: argparse.Namespace) -> int:
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
            in_use.socket or daemon_socket_path(args.socket, config.daemon.socket, runtime_dir=None)
        )
        profile, table = profile_for(key, config, name, args.profile)
        suffix = "" if profile == DEFAULT_PROFILE else profile
        if args.http:
            url = endpoint_url(config, sock)
            if suffix:
                url += f"?profile={suffix}"
            from ..host.statefile import state_dir  # trio: not for every command's parser

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
    if table is not None:
        _write_profile(path, profile, table)
    try:
        written = write(key, target, new, secret=bool(args.http))
    except HostConfigError as exc:
        raise ConnectError(str(exc)) from None
    _report(written, host(key).title)
    if table is not None:
        _reload(sock)
    return 0


def _write_profile(path: str, profile: str, table: dict[str, Any]) -> None:
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
            "it holds mcpd's token, which any profile and a reload accept"
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
    except Unreachable:
        print("mcpd is not running here; it reads the new profile when it starts")
    except Exception as exc:  # a rejected reload: the daemon says why
        print(f"mcpd: the running daemon did not take the new profile: {exc}", file=sys.stderr)
    else:
        print("mcpd reloaded its configuration")


def add_parser(sub: Any) -> None:
    c = sub.add_parser("connect", help="print (or --write) the config entry a host needs")
    c.add_argument("host", choices=sorted(HOSTS), help="the host to connect")
    c.add_argument("--profile", help="the profile (default: the host's own, set up if missing)")
    c.add_argument("--http", action="store_true", help="the HTTP endpoint instead of the bridge")
    c.add_argument("--write", action="store_true", help="merge into the files, keeping backups")
    c.add_argument("--name", default="mcpd", help="the entry's name in the host (default mcpd)")
    c.add_argument("--file", help="the host's config file (default: where the host reads it)")
    c.add_argument(
        "--config",
        help=f"mcpd's config (default: {config_in_use_help()})",
    )
    c.add_argument(
        "--socket", help="the daemon's socket (default: the running daemon's, else the config's)"
    )
    c.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    try:
        return run(args)
    except ConnectError as exc:
        print(f"mcpd: {exc}", file=sys.stderr)
        return 2
    except Untrusted as exc:
        print(f"mcpd: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
