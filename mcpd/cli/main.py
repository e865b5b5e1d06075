"""``mcpd serve|status|dashboard|tools|call|reload|reset|check-config|import|bridge|auth|
connect|token``, ``approve`` (in ``pins.pending``), ``pins`` (in ``pins.files``),
``approvals|calls``, and (in ``prompt_resource_cmds``) ``prompts|resources|read|prompt``.

This module is the command line's grammar, every command in the order ``mcpd
--help`` lists them, and its entry point. What the commands do is elsewhere: those
that ask the running daemon in ``client_cmds``, those that work from the config
file in ``config_cmds``, and ``logins.auth``, ``hosts.connect`` and
``prompt_resource_cmds`` (which also declare their own arguments).

Exit codes (``exits``): 0 ok, 1 the tool returned isError, 2 usage, 3 daemon
unreachable, 4 the daemon's reply could not be read, 78 config error.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Final

from protocol.shown.visible import visible

from .. import __version__
from ..config.tables.model import default_config_path
from .client import JSON_HELP, SOCKET_HELP, config_in_use_help, socket_path
from .exits import EXIT_USAGE, client_for

PROMPT_RESOURCE_COMMANDS = ("prompts", "resources", "read", "prompt")
COMMANDS: frozenset[str] = frozenset(
    {"serve", "check-config", "tools", "call", "status", "import", "reload", "reset", "bridge"}
    | {"auth", "token", "connect", "approve", "pins", "dashboard", "approvals", "calls"}
    | {*PROMPT_RESOURCE_COMMANDS}
)
# Commands that take a list of names after a positional: argparse ends that list at the
# first option, so `approve ALIAS --yes NAME` would leave NAME over. Their words are
# read again with options and names mixed (the command has no subcommands to forbid it).
NAMES_AMID_OPTIONS: frozenset[str] = frozenset({"approve"})


# The shortest wait between two redraws: any shorter asks the daemon for little but
# its status, over and over.
WATCH_AT_LEAST: Final = 0.2


def _seconds(text: str) -> float:
    """``--watch``'s interval: a time to wait, at least ``WATCH_AT_LEAST``."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (WATCH_AT_LEAST <= seconds < math.inf):
        raise argparse.ArgumentTypeError(f"must be at least {WATCH_AT_LEAST} seconds, not {text}")
    return seconds


def _length(text: str) -> int:
    """``--check-names``' limit: a name's length a host takes, at least 1."""
    try:
        length = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of characters: {text!r}") from None
    if length < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 character, not {text}")
    return length


_EPILOG = """\
`mcpd COMMAND --help` tells of one command; the manual page mcpd(1) of them all, with
examples (in the source tree: man -l man/mcpd.1; mcpd.toml(5) for the config file).

exit codes:
  0   success
  1   the tool returned an error, or the daemon could not do what it was asked
  2   usage
  3   no daemon answers on the socket
  4   its reply could not be read
  78  configuration error"""


class _Grammar:
    """The commands' parsers being built: all of them, or only ``only``'s."""

    def __init__(
        self, sub: argparse._SubParsersAction[argparse.ArgumentParser], only: str | None
    ) -> None:
        self.sub = sub
        self.only = only

    def want(self, *names: str) -> bool:
        return self.only is None or self.only in names

    def client_cmd(self, name: str, help: str) -> argparse.ArgumentParser:
        """A command that asks the running daemon, over its socket."""
        sp = self.sub.add_parser(name, help=help)
        sp.add_argument("--socket", type=socket_path, help=SOCKET_HELP)
        return sp


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole grammar, or the top level with only the command ``only``: a command
    that runs (``serve`` at boot, ``bridge`` for each host session) does not import the
    code of every other."""
    p = argparse.ArgumentParser(
        prog="mcpd",
        description="MCP client daemon",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"mcpd {__version__}")
    grammar = _Grammar(p.add_subparsers(dest="command", required=True), only)
    # In the order ``mcpd --help`` lists the commands.
    _daemon_commands(grammar)
    _tool_commands(grammar)
    _watch_commands(grammar)
    _import_command(grammar)
    _steer_commands(grammar)
    _trust_commands(grammar)
    _host_commands(grammar)
    # argparse reports words it did not recognise from the top, with mcpd's usage; each
    # command's parser kept in its arguments lets main report them with the command's.
    for command in grammar.sub.choices.values():
        command.set_defaults(usage_of=command)
    return p


def _daemon_commands(g: _Grammar) -> None:
    """``serve`` runs the daemon; ``check-config`` reads the config it would run."""
    if g.want("serve"):
        from .config_cmds import cmd_serve

        s = g.sub.add_parser("serve", help="run the daemon")
        # The demo's servers are its own: a config beside them would be ignored.
        source = s.add_mutually_exclusive_group()
        source.add_argument("--config", help=f"config file (default: {default_config_path()})")
        source.add_argument(
            "--demo",
            action="store_true",
            help="run the bundled demo servers instead of a config file",
        )
        s.add_argument(
            "--socket",
            type=socket_path,
            help="socket path (overrides the config and $MCPD_SOCKET)",
        )
        s.add_argument(
            "--log",
            choices=["auto", "journal", "stderr"],
            default="auto",
            help="where its log goes (default auto: the journal under systemd, else stderr)",
        )
        s.add_argument(
            "--log-level",
            default="info",
            choices=["debug", "info", "warning", "error"],
            help="the least a line must be to be logged (default: info)",
        )
        s.set_defaults(func=cmd_serve)

    if g.want("check-config"):
        from .config_cmds import cmd_check_config

        c = g.sub.add_parser("check-config", help="validate the config file and list its servers")
        c.add_argument("--config", help=f"config file (default: {default_config_path()})")
        c.set_defaults(func=cmd_check_config)


def _tool_commands(g: _Grammar) -> None:
    """``tools`` lists the tools as agents (and the operator) see them; ``call`` calls
    one."""
    if g.want("tools"):
        from .client_cmds import cmd_tools

        t = g.client_cmd("tools", "list the aggregated tools")
        t.add_argument("--json", action="store_true", help=JSON_HELP)
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
            type=_length,
            metavar="N",
            help="report tool names longer than N characters (exit 1 if any)",
        )
        t.add_argument(
            "--pending",
            action="store_true",
            help="list the tools, prompts and templates held until `mcpd approve`",
        )
        t.add_argument(
            "--findings",
            action="store_true",
            help="list what the finding rules flagged, and hidden characters taken out",
        )
        t.add_argument(
            "--policy",
            action="store_true",
            help="show what the [[policy]] rules decide for a call to each tool",
        )
        t.add_argument(
            "--host-prefix",
            default="",
            metavar="PREFIX",
            help="with --check-names: what the host puts before each name, e.g. mcp__mcpd__",
        )
        t.set_defaults(func=cmd_tools)

    if g.want("call"):
        from .client_cmds import cmd_call

        k = g.client_cmd("call", "call a tool: mcpd call NAME '{\"arg\": 1}'")
        k.add_argument("name", help="the tool's name, as `mcpd tools` lists it")
        k.add_argument(
            "arguments", nargs="?", default="{}", help="its arguments, a JSON object (default: {})"
        )
        k.add_argument("--json", action="store_true", help="print the whole result as JSON")
        k.add_argument("--profile", metavar="NAME", help="call as an agent of this profile")
        k.set_defaults(func=cmd_call)


def _watch_commands(g: _Grammar) -> None:
    """What the daemon is doing: its servers' states (``status``, ``dashboard``), the
    calls waiting for approval (``approvals``) and the calls made (``calls``)."""
    if g.want("status"):
        from .client_cmds import cmd_status

        st = g.client_cmd("status", "show each server's state")
        st.add_argument("--json", action="store_true", help=JSON_HELP)
        st.add_argument(
            "--watch",
            nargs="?",
            const=2.0,
            type=_seconds,
            metavar="SECONDS",
            help="redraw every SECONDS (default 2) until Ctrl-C",
        )
        st.set_defaults(func=cmd_status)

    if g.want("dashboard"):
        from .logins.dashboard import cmd_dashboard

        db = g.client_cmd("dashboard", "print (and open) an address of the status page")
        db.add_argument(
            "--no-browser", action="store_true", help="print the address, do not open it"
        )
        db.set_defaults(func=cmd_dashboard)

    if g.want("approvals"):
        from .approvals import add_approvals

        add_approvals(g.sub)

    if g.want("calls"):
        from .calls import add_calls

        add_calls(g.sub)


def _import_command(g: _Grammar) -> None:
    """``import``: another MCP host's servers as mcpd's config."""
    if g.want("import"):
        from .config_cmds import cmd_import
        from .hosts.import_sources import HOST_NAMES

        im = g.sub.add_parser("import", help="print mcpd TOML for another MCP host's servers")
        im.add_argument(
            "path",
            metavar="PATH|HOST",
            help="a host's file (claude_desktop_config.json, .mcp.json, .vscode/mcp.json, ...) "
            "or a host whose user-wide file to read: " + ", ".join(HOST_NAMES),
        )
        im.add_argument("-o", "--output", help="write the TOML to this file instead of stdout")
        im.add_argument("--force", action="store_true", help="replace --output if it exists")
        im.set_defaults(func=cmd_import)


def _steer_commands(g: _Grammar) -> None:
    """What the running daemon is told to do now (``reload``, ``reset``), and ``bridge``,
    which a host runs to reach it."""
    if g.want("reload"):
        from .client_cmds import cmd_reload

        r = g.client_cmd("reload", "re-read the config file (like SIGHUP)")
        r.set_defaults(func=cmd_reload)

    if g.want("reset"):
        from .client_cmds import cmd_reset

        rs = g.client_cmd("reset", "close a server's open circuit now: its next call decides")
        rs.add_argument("server", metavar="SERVER", help="the server's alias")
        rs.set_defaults(func=cmd_reset)

    if g.want("bridge"):
        from .client_cmds import cmd_bridge

        b = g.client_cmd("bridge", "serve MCP on stdin/stdout, relayed to the daemon")
        b.add_argument("--profile", metavar="NAME", help="the profile this host sees")
        b.set_defaults(func=cmd_bridge)


def _trust_commands(g: _Grammar) -> None:
    """What mcpd trusts: the servers' approved definitions (``approve``, ``pins``), the
    logins to servers (``auth``) and the token its HTTP endpoint asks of hosts
    (``token``)."""
    if g.want("approve"):
        from .pins.pending import add_approve

        add_approve(g.client_cmd)

    if g.want("pins"):
        from .pins.files import add_pins

        add_pins(g.sub)

    if g.want("auth"):
        from .logins.auth import add_auth_commands

        add_auth_commands(g.sub)

    if g.want("token"):
        from .config_cmds import cmd_token

        tk = g.sub.add_parser("token", help="print the HTTP endpoint's bearer token")
        tk.add_argument("--rotate", action="store_true", help="replace it with a new one")
        tk.add_argument("--config", help=f"config file (default: {config_in_use_help()})")
        tk.set_defaults(func=cmd_token)


def _host_commands(g: _Grammar) -> None:
    """What a host needs: its config entry (``connect``), and the prompts and resources
    it would be offered."""
    if g.want("connect"):
        from .hosts.connect import add_connect

        add_connect(g.sub)

    if g.want(*PROMPT_RESOURCE_COMMANDS):
        from .prompt_resource_cmds import add_commands

        add_commands(g.client_cmd, client_for)


def main(argv: list[str] | None = None) -> None:
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(words[0] if words and words[0] in COMMANDS else None)
    try:
        args, extra = parser.parse_known_args(argv)
        if extra and args.command in NAMES_AMID_OPTIONS:
            command = argparse.Namespace(command=args.command)
            args, extra = args.usage_of.parse_known_intermixed_args(words[1:], command)
        if extra:
            # argparse's Namespace has only what the chosen subcommand's defaults set.
            # The words are echoed: escaped, so none can act on the terminal or start
            # a line of its own.
            shown = visible(" ".join(extra))
            getattr(args, "usage_of", parser).error(f"unrecognized arguments: {shown}")
    except SystemExit as exc:
        raise SystemExit(EXIT_USAGE if exc.code not in (0, None) else 0) from None
    try:
        code = args.func(args)
    except KeyboardInterrupt:
        code = 130
    except BaseExceptionGroup as group:
        # Ctrl-C inside a trio nursery comes wrapped in a group; alone in it, it is
        # the same quiet stop as a bare one. Anything beside it is a fault to show.
        interrupted, rest = group.split(KeyboardInterrupt)
        if interrupted is None or rest is not None:
            raise
        code = 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    raise SystemExit(code)
