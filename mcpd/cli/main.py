"""``mcpd serve|status|tools|call|reload|check-config|import|bridge|auth|connect|token``,
and (in ``surface``) ``prompts|resources|read|prompt``.

Exit codes: 0 ok, 1 the tool returned isError, 2 usage, 3 daemon unreachable,
4 the daemon's reply could not be read, 78 config error.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from typing import Any, NoReturn

import msgspec

from protocol import jsonrpc as rpc

from .. import __version__
from ..config.load import load
from ..config.model import EX_CONFIG, Config, ConfigError, default_config_path
from .client import BadReply, Client, Unreachable, socket_path

EXIT_TOOL_ERROR = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_BAD_REPLY = 4


def _fail(code: int, message: str) -> NoReturn:
    print(f"mcpd: {message}", file=sys.stderr)
    raise SystemExit(code)


def _load_config(path: str | None) -> tuple[Config, str]:
    path = path or default_config_path()
    try:
        return load(path), path
    except ConfigError as exc:
        _fail(EX_CONFIG, f"config error: {exc}")


def cmd_serve(args: argparse.Namespace) -> int:
    from ..host.journal import setup_logging
    from ..serve import serve

    setup_logging(args.log, args.log_level)
    if args.demo:
        config_path = None
        config = None
    else:
        config, config_path = _load_config(args.config)
    return serve(config, config_path, demo=args.demo, socket=args.socket)


def cmd_check_config(args: argparse.Namespace) -> int:
    config, path = _load_config(args.config)
    print(f"{path}: OK, {len(config.servers)} server(s); socket {config.socket_path()}")
    for alias, s in sorted(config.servers.items()):
        where = f"{s.command} {' '.join(s.args)}".strip() if s.command else s.url
        flags: list[str] = [s.kind]
        if s.trusted:
            flags.append("trusted")
        if not s.enabled:
            flags.append("disabled")
        if s.start == "lazy":
            flags.append("lazy")
        if s.auth is not None:
            flags.append(s.auth.type.replace("_", " "))
        print(f"  {alias:<20} {', '.join(flags):<16} {where}")
    return 0


def _client(args: argparse.Namespace) -> Client:
    try:
        return Client(socket_path(args.socket))
    except Unreachable as exc:
        _fail(EXIT_UNREACHABLE, str(exc))


def _request(client: Client, method: str, params: dict[str, Any] | None = None) -> Any:
    try:
        return client.request(method, params)
    except Unreachable as exc:
        _fail(EXIT_UNREACHABLE, str(exc))
    except BadReply as exc:
        _fail(EXIT_BAD_REPLY, str(exc))
    except rpc.RPCError as exc:
        _fail(EXIT_TOOL_ERROR, f"error {exc.code}: {exc.message}")


def cmd_tools(args: argparse.Namespace) -> int:
    footer = None
    with _client(args) as client:
        try:
            if args.profile is not None:
                seen = client.request("mcpd/tools", {"profile": args.profile})
                tools, footer = seen["tools"], _profile_footer(seen)
            else:
                tools = client.list_tools()
        except Unreachable as exc:
            _fail(EXIT_UNREACHABLE, str(exc))
        except BadReply as exc:
            _fail(EXIT_BAD_REPLY, str(exc))
        except rpc.RPCError as exc:
            _fail(EXIT_TOOL_ERROR, f"error {exc.code}: {exc.message}")
    if args.check_names is not None:
        return _check_names([t["name"] for t in tools], args.check_names, args.host_prefix)
    if args.format:
        from ..agents.formats import translate

        print(json.dumps(translate(tools, args.format), indent=2))
        return 0
    if args.json:
        print(json.dumps({"tools": tools}, indent=2))
        return 0
    width = shutil.get_terminal_size((120, 20)).columns
    name_w = max([len(t["name"]) for t in tools] + [4])
    print(f"{'NAME':<{name_w}}  {'SERVER':<12} DESCRIPTION")
    for t in tools:
        meta = t.get("_meta") or {}
        desc = (t.get("description") or "").replace("\n", " ")
        room = max(20, width - name_w - 16)
        desc = desc if len(desc) <= room else desc[: room - 1] + "…"
        print(f"{t['name']:<{name_w}}  {meta.get('mcpd/server', '?'):<12} {desc}")
    print(f"{len(tools)} tools" + (f"; {footer}" if footer else ""))
    return 0


def _profile_footer(seen: dict[str, Any]) -> str:
    """What the profile's agents are listed, for ``mcpd tools --profile``."""
    name, listed = seen["profile"], seen["listed"]
    if seen["mode"] == "all":
        return f"profile {name} lists them all (discovery {seen['discovery']})"
    return (
        f"profile {name} is in search mode (discovery {seen['discovery']}): its agents are "
        f"listed {len(listed)} tools ({', '.join(listed)}) and find these by searching"
    )


def _check_names(names: list[str], limit: int, prefix: str) -> int:
    from ..agents.formats import too_long

    long = too_long(names, limit, prefix)
    with_prefix = f" after the host's prefix {prefix!r} ({len(prefix)})" if prefix else ""
    if not long:
        print(f"all {len(names)} tool names fit {limit} characters{with_prefix}")
        return 0
    print(f"{len(long)} of {len(names)} tool names do not fit {limit} characters{with_prefix}:")
    for name in long:
        print(f"  {name}  ({len(prefix) + len(name)})")
    room = limit - len(prefix)
    if room >= 16:
        print(
            f"[naming] max_length = {room} makes mcpd shorten them (a short hash keeps "
            "each unique and stable)"
        )
    else:
        print(f"only {room} characters are left for mcpd's names; use a shorter host prefix")
    return EXIT_TOOL_ERROR


def cmd_call(args: argparse.Namespace) -> int:
    try:
        arguments = json.loads(args.arguments) if args.arguments else {}
    except ValueError as exc:
        _fail(EXIT_USAGE, f"arguments are not valid JSON: {exc}")
    if not isinstance(arguments, dict):
        _fail(EXIT_USAGE, "arguments must be a JSON object")
    with _client(args) as client:
        if args.profile is not None:
            _request(client, "mcpd/useProfile", {"profile": args.profile})
        result = _request(client, "tools/call", {"name": args.name, "arguments": arguments})
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for block in result.get("content") or []:
            if block.get("type") == "text":
                print(block.get("text", ""))
            else:
                print(f"[{block.get('type')} content]")
    return EXIT_TOOL_ERROR if result.get("isError") else 0


def cmd_status(args: argparse.Namespace) -> int:
    from .status_view import render_status

    if args.watch is not None:
        return _watch_status(args)
    with _client(args) as client:
        status = _request(client, "mcpd/status")
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        print(render_status(status, color=sys.stdout.isatty()))
    return 0


def _watch_status(args: argparse.Namespace) -> int:
    """Redraw the status every few seconds until Ctrl-C; rides out daemon restarts."""
    from .status_view import render_status, watch_frame

    interval = max(0.2, args.watch)
    tty = sys.stdout.isatty()
    path = socket_path(args.socket)
    client: Client | None = None
    try:
        while True:
            try:
                client = client or Client(path)
                body = render_status(client.request("mcpd/status"), color=tty)
            except (Unreachable, BadReply, rpc.RPCError) as exc:
                if client is not None:
                    client.close()
                client = None
                body = f"mcpd: {exc}"
            frame = watch_frame(body, interval, clear=tty)
            sys.stdout.write(frame)
            sys.stdout.flush()
            time.sleep(interval)
    except KeyboardInterrupt:
        return 0
    finally:
        if client is not None:
            client.close()


def cmd_import(args: argparse.Namespace) -> int:
    from ..config.importer import import_file
    from ..config.importwrite import move_secrets, secrets_dir, to_toml

    try:
        imported = import_file(args.path)
    except ConfigError as exc:
        _fail(EX_CONFIG, f"cannot import: {exc}")
    moved = {}
    if args.output:
        if os.path.exists(args.output) and not args.force:
            _fail(EXIT_USAGE, f"{args.output} exists (use --force to replace it)")
        try:
            moved = move_secrets(imported, secrets_dir(args.output))
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(to_toml(imported, moved))
        except OSError as exc:
            _fail(EXIT_USAGE, f"cannot write {exc.filename or args.output}: {exc.strerror}")
    else:
        sys.stdout.write(to_toml(imported))
    extra = []
    if moved:
        extra.append(f"{len(moved)} secret(s) moved to {secrets_dir(args.output)}")
    elif imported.secrets:
        extra.append(f"{len(imported.secrets)} secret(s) to provide")
    if imported.notes:
        extra.append(f"{len(imported.notes)} note(s)")
    print(
        f"mcpd: imported {len(imported.servers)} server(s) from {args.path}"
        + (f"; {', '.join(extra)} (see the comments at the top)" if extra else ""),
        file=sys.stderr,
    )
    for where, path in moved.items():
        print(f"mcpd:   {'.'.join(where)} -> {path} (mode 0600)", file=sys.stderr)
    return 0


def cmd_reload(args: argparse.Namespace) -> int:
    with _client(args) as client:
        report = _request(client, "mcpd/reload")
    print("reloaded: " + ", ".join(f"{k} {', '.join(v) or '-'}" for k, v in report.items()))
    return 0


def cmd_bridge(args: argparse.Namespace) -> int:
    from ..agents.bridge import run_bridge

    return run_bridge(socket_path(args.socket), args.profile)


def cmd_token(args: argparse.Namespace) -> int:
    from ..host.statefile import state_dir
    from ..host.token import TokenError, read_token, token_path, write_token

    path = args.config or default_config_path()
    try:
        config = load(path)
    except ConfigError as exc:
        if args.config or os.path.exists(path):
            _fail(EX_CONFIG, f"config error: {exc}")
        config = Config()  # no config file: the default state directory
    where = token_path(state_dir(config))
    try:
        token = write_token(where) if args.rotate else read_token(where)
    except TokenError as exc:
        _fail(EXIT_USAGE, str(exc))
    print(token)
    if args.rotate:
        print(f"mcpd: a new token is in {where}; the old one no longer works", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mcpd", description="MCP client daemon")
    p.add_argument("--version", action="version", version=f"mcpd {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def client_cmd(name: str, help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help)
        sp.add_argument(
            "--socket", help="daemon socket (default: $MCPD_SOCKET or the standard path)"
        )
        return sp

    s = sub.add_parser("serve", help="run the daemon")
    s.add_argument("--config", help=f"config file (default: {default_config_path()})")
    s.add_argument("--demo", action="store_true", help="run with the bundled demo servers")
    s.add_argument("--socket", help="socket path (overrides the config)")
    s.add_argument("--log", choices=["auto", "journal", "stderr"], default="auto")
    s.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    s.set_defaults(func=cmd_serve)

    c = sub.add_parser("check-config", help="validate the config file and list its servers")
    c.add_argument("--config")
    c.set_defaults(func=cmd_check_config)

    t = client_cmd("tools", "list the aggregated tools")
    t.add_argument("--json", action="store_true")
    t.add_argument(
        "--profile",
        metavar="NAME",
        help="every tool of this profile, under its names, and what its agents are listed",
    )
    t.add_argument(
        "--format",
        choices=["anthropic", "openai", "openai-responses"],
        help="print the tools as a model API's tool definitions (JSON)",
    )
    t.add_argument(
        "--check-names",
        type=int,
        metavar="N",
        help="report tool names longer than N characters (exit 1 if any)",
    )
    t.add_argument(
        "--host-prefix",
        default="",
        metavar="PREFIX",
        help="with --check-names: what the host puts before each name, e.g. mcp__mcpd__",
    )
    t.set_defaults(func=cmd_tools)

    k = client_cmd("call", "call a tool: mcpd call NAME '{\"arg\": 1}'")
    k.add_argument("name")
    k.add_argument("arguments", nargs="?", default="{}")
    k.add_argument("--json", action="store_true")
    k.add_argument("--profile", metavar="NAME", help="call as an agent of this profile")
    k.set_defaults(func=cmd_call)

    st = client_cmd("status", "show each server's state")
    st.add_argument("--json", action="store_true")
    st.add_argument(
        "--watch",
        nargs="?",
        const=2.0,
        type=float,
        metavar="SECONDS",
        help="redraw every SECONDS (default 2) until Ctrl-C",
    )
    st.set_defaults(func=cmd_status)

    im = sub.add_parser(
        "import", help="print mcpd TOML for another host's mcpServers / VS Code mcp.json file"
    )
    im.add_argument("path", help="e.g. claude_desktop_config.json, .mcp.json, .vscode/mcp.json")
    im.add_argument("-o", "--output", help="write the TOML to this file instead of stdout")
    im.add_argument("--force", action="store_true", help="replace --output if it exists")
    im.set_defaults(func=cmd_import)

    r = client_cmd("reload", "re-read the config file (like SIGHUP)")
    r.set_defaults(func=cmd_reload)

    b = client_cmd("bridge", "serve MCP on stdin/stdout, relayed to the daemon")
    b.add_argument("--profile", metavar="NAME", help="the profile this host sees")
    b.set_defaults(func=cmd_bridge)

    from .auth import add_auth_commands

    add_auth_commands(sub)

    tk = sub.add_parser("token", help="print the HTTP endpoint's bearer token")
    tk.add_argument("--rotate", action="store_true", help="replace it with a new one")
    tk.add_argument("--config", help=f"config file (default: {default_config_path()})")
    tk.set_defaults(func=cmd_token)

    from .connect import add_parser

    add_parser(sub)

    from .surface import add_commands

    add_commands(client_cmd, _client)
    return p


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        raise SystemExit(EXIT_USAGE if exc.code not in (0, None) else 0) from None
    try:
        code = args.func(args)
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    raise SystemExit(code)


def to_json(obj: Any) -> str:
    return msgspec.json.encode(obj).decode()
