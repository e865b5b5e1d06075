"""``mcpd tools``, ``mcpd call``, ``mcpd status``, ``mcpd reload`` and ``mcpd bridge``:
the commands that ask the running daemon, over its socket.

Each opens a ``Client`` on the socket (``--socket``, ``$MCPD_SOCKET``, the config's
``[daemon] socket`` or the standard path: see ``config.loading.paths``) and turns what can go
wrong there into an exit code: 3 when the daemon cannot be reached, 4 when its reply
cannot be read, 1 for an error it answered (``exits.client_for`` and ``exits.ask``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from typing import NoReturn

import msgspec

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.messages import JsonObject
from protocol.shown.visible import visible

from ..agents.lists.list_hints import UNKNOWN_TOOL
from ..config.loading.paths import client_socket_path
from ..config.tables.model import CONFIG_ERROR, EX_CONFIG
from ..reloading.outcome import ReloadReport
from ..server_row import ResetOutcome, ServerRow
from ..status_document import StatusDocument
from .client import QUICK, BadReply, Client, DaemonUnreachable, NotAnswering
from .exits import (
    EXIT_BAD_REPLY,
    EXIT_TOOL_ERROR,
    EXIT_UNREACHABLE,
    arguments_given,
    ask,
    ask_as,
    ask_object,
    client_for,
    fail,
    for_a_person,
)
from .status_view import login_lines


def cmd_tools(args: argparse.Namespace) -> int:
    _refuse_ignored(args)
    if args.pending or args.findings:
        from .pins.pending import cmd_held_or_found

        return cmd_held_or_found(args)
    footer = None
    tools: Sequence[Mapping[str, object]]
    decisions: dict[str, dict[str, object]] | None = None
    with client_for(args, QUICK) as client:
        if not (args.json or args.format):
            client.for_a_person()
        try:
            if args.profile is not None or args.policy:
                params: JsonObject = {"policy": True} if args.policy else {}
                if args.profile is not None:
                    params["profile"] = args.profile
                seen = client.request_as("mcpd/tools", _ProfileTools, params)
                tools, decisions = seen.tools, seen.decisions
                if args.profile is not None:
                    footer = _profile_footer(seen)
            else:
                tools = client.list_tools()
            table = not (args.json or args.format or args.check_names is not None)
            servers = _servers_beside(client) if table else []
        except DaemonUnreachable as exc:
            fail(EXIT_UNREACHABLE, str(exc))
        except BadReply as exc:
            fail(EXIT_BAD_REPLY, str(exc))
        except rpc.RPCError as exc:
            fail(EXIT_TOOL_ERROR, f"error {exc.code}: {exc.message}")
    if args.check_names is not None:
        names = [_name(t) for t in tools]
        from .name_fit import names_fit, names_fit_json

        if args.json:
            return names_fit_json(names, args.check_names, args.host_prefix)
        return names_fit(names, args.check_names, args.host_prefix)
    if args.format:
        from ..agents.lists.formats import translate

        print(json.dumps(translate([dict(t) for t in tools], args.format), indent=2))
        return 0
    if args.json:
        out: dict[str, object] = {"tools": tools}
        if decisions is not None:
            out["decisions"] = decisions
        print(json.dumps(out, indent=2))
        return 0
    width = shutil.get_terminal_size((120, 20)).columns
    rows = [
        (
            visible(_name(t)),
            visible(_server_of(t)),
            visible(str(t.get("description") or "").replace("\n", " ")),
            _decision(decisions.get(_name(t))) if decisions is not None else "",
        )
        for t in tools
    ]
    name_w = max([len(name) for name, _, _, _ in rows] + [4])
    dec_w = max([len(d) for _, _, _, d in rows] + [8]) + 1 if decisions is not None else 0
    column = f"{'DECISION':<{dec_w}}" if dec_w else ""
    print(f"{'NAME':<{name_w}}  {'SERVER':<12} {column}DESCRIPTION")
    for name, server, desc, decision in rows:
        room = max(20, width - name_w - 16 - dec_w)
        desc = desc if len(desc) <= room else desc[: room - 1] + "…"
        print(f"{name:<{name_w}}  {server:<12} {decision:<{dec_w}}{desc}")
    print(f"{len(tools)} tools" + (f"; {footer}" if footer else ""))
    for line in login_lines(servers):
        print(line)
    return 0


def _servers_beside(client: Client) -> list[ServerRow]:
    """The servers' rows, for a server the table cannot show (one waiting for a login)."""
    try:
        return client.request_as("mcpd/status", StatusDocument).servers
    except rpc.RPCError:
        return []


class _ProfileTools(msgspec.Struct):
    """``mcpd/tools``: a profile's tools, each as the daemon wrote it, what its agents
    are listed, and (asked for) the policy's decision on each, by name."""

    profile: str
    discovery: str
    mode: str
    listed: list[str]
    tools: list[dict[str, object]]
    decisions: dict[str, dict[str, object]] | None = None


def _name(tool: Mapping[str, object]) -> str:
    return str(tool.get("name"))


def _server_of(tool: Mapping[str, object]) -> str:
    """The server a tool comes from, as its ``_meta`` says."""
    meta = tool.get("_meta")
    return str(meta.get("mcpd/server", "?")) if isinstance(meta, dict) else "?"


def _decision(decision: Mapping[str, object] | None) -> str:
    """A tool's policy decision in a few words: ``ask policy[1]``, ``ask (operator only)
    policy[3]``, ``allow (30 calls a minute) policy[2]``, ``allow``."""
    if decision is None:
        return "-"
    words = [str(decision["action"])]
    if decision.get("decider") == "operator":
        words.append("(operator only)")
    if decision.get("rate"):
        words.append(f"({decision['rate']})")
    if decision.get("rule") is not None:
        words.append(f"policy[{decision['rule']}]")
    return " ".join(words)


def _profile_footer(seen: _ProfileTools) -> str:
    """What the profile's agents are listed, for ``mcpd tools --profile``."""
    name, listed = seen.profile, seen.listed
    if seen.mode == "all":
        return f"profile {name} lists them all (discovery {seen.discovery})"
    return (
        f"profile {name} is in search mode (discovery {seen.discovery}): its agents are "
        f"listed {len(listed)} tools ({', '.join(listed)}) and find these by searching"
    )


def _refuse_ignored(args: argparse.Namespace) -> None:
    """Options that what else was asked for would leave unused: a usage error, so that
    a script asking for JSON, or for a host's prefix, does not get something else."""
    listing = [
        flag
        for flag, given in (("--pending", args.pending), ("--findings", args.findings))
        if given
    ]
    if listing:
        ignored = [
            flag
            for flag, given in (
                ("--findings", args.pending and args.findings),
                ("--format", args.format),
                ("--check-names", args.check_names is not None),
                ("--profile", args.profile is not None),
                ("--policy", args.policy),
            )
            if given
        ]
        if ignored:
            args.usage_of.error(f"{listing[0]} does not go with {', '.join(ignored)}")
    if args.host_prefix and args.check_names is None:
        args.usage_of.error("--host-prefix is for --check-names: give it a length too")
    if args.check_names is not None and args.format:
        args.usage_of.error(
            "--check-names reports on the names, --format prints the tools: give one of them"
        )


def cmd_call(args: argparse.Namespace) -> int:
    arguments = arguments_given(args.arguments)
    with client_for(args) as client:
        client.tell_waits(_waiting)
        if args.profile is not None:
            ask(client, "mcpd/useProfile", {"profile": args.profile})
        params: JsonObject = {"name": args.name, "arguments": arguments}
        result = ask_object(client, "tools/call", params, progress=_progress)
    from .prompt_resource_cmds import refuse_unfinished, render_block

    if args.json:
        print(json.dumps(result, indent=2))
    refuse_unfinished(f"the call of {args.name}", result)
    if not args.json:
        content = result.get("content")
        for block in content if isinstance(content, list) else []:
            print(_for_the_command_line(result, render_block(block)))
    return EXIT_TOOL_ERROR if result.get("isError") else 0


def _for_the_command_line(result: JsonObject, said: str) -> str:
    """mcpd's answer to an unknown name, with the way to list tools a person has here:
    the method an agent calls means nothing at a shell prompt."""
    meta = result.get("_meta")
    return for_a_person(said) if isinstance(meta, dict) and UNKNOWN_TOOL in meta else said


def _waiting(waits: JsonObject) -> None:
    """A person's approval awaited, said as it begins: silence would read as a hang."""
    id, timeout = waits.get("id"), waits.get("timeout")
    if not isinstance(id, str):
        return
    shown = visible(id)
    within = f" (up to {timeout:g} s)" if isinstance(timeout, int | float) else ""
    print(
        f"mcpd: this call waits for a person's approval{within}: in another terminal, "
        f"one that never ran an agent of mcpd's, `mcpd approvals approve {shown}` (or "
        f"`deny {shown}`); `mcpd approvals` lists what waits",
        file=sys.stderr,
        flush=True,
    )


def _progress(report: JsonObject) -> None:
    """A tool's progress, on stderr (stdout is the result): ``progress 3/10: message``."""
    done, total, message = report.get("progress"), report.get("total"), report.get("message")
    said = f"progress {done:g}" if isinstance(done, int | float) else "progress"
    if isinstance(total, int | float):
        said += f"/{total:g}"
    if isinstance(message, str) and message:
        said += f": {visible(message)}"
    print(f"mcpd: {said}", file=sys.stderr, flush=True)


def cmd_status(args: argparse.Namespace) -> int:
    from .status_view import render_status

    if args.watch is not None:
        return _watch_status(args)
    if args.json:
        return _status_json(args)
    with client_for(args, QUICK) as client:
        status = ask_as(client, "mcpd/status", StatusDocument)
    print(render_status(status, color=sys.stdout.isatty()))
    return 0


def _status_json(args: argparse.Namespace) -> int:
    """The status as JSON; when there is none, what stands in its way, as JSON on
    stdout too (``{"error": {"state", "message"}}``): a script reading stdout learns
    why, and the exit code is the one the message on stderr comes with."""
    try:
        with Client(client_socket_path(args.socket), QUICK) as client:
            status = client.request("mcpd/status")
    except NotAnswering as exc:
        _json_error("not_answering", str(exc), EXIT_UNREACHABLE)
    except DaemonUnreachable as exc:
        _json_error("unreachable", str(exc), EXIT_UNREACHABLE)
    except BadReply as exc:
        _json_error("bad_reply", str(exc), EXIT_BAD_REPLY)
    except rpc.RPCError as exc:
        if isinstance(exc.data, dict) and CONFIG_ERROR in exc.data:
            _json_error("config_error", exc.message, EX_CONFIG)
        _json_error("failed", f"error {exc.code}: {exc.message}", EXIT_TOOL_ERROR)
    print(json.dumps(status, indent=2))
    return 0


def _json_error(state: str, message: str, code: int) -> NoReturn:
    print(json.dumps({"error": {"state": state, "message": message}}, indent=2), flush=True)
    fail(code, message, lines=code == EX_CONFIG)


def _watch_status(args: argparse.Namespace) -> int:
    """Redraw the status every few seconds until Ctrl-C; rides out daemon restarts."""
    from .status_view import render_status, watch_frame

    interval = args.watch
    tty = sys.stdout.isatty()
    path = client_socket_path(args.socket)
    client: Client | None = None
    try:
        while True:
            try:
                client = client or Client(path, QUICK)
                body = render_status(client.request_as("mcpd/status", StatusDocument), color=tty)
            except (DaemonUnreachable, BadReply, rpc.RPCError) as exc:
                if client is not None:
                    client.close()
                client = None
                body = f"mcpd: {visible(str(exc), lines=True)}"
            frame = watch_frame(body, interval, clear=tty)
            sys.stdout.write(frame)
            sys.stdout.flush()
            time.sleep(interval)
    except KeyboardInterrupt:
        return 0
    finally:
        if client is not None:
            client.close()


def cmd_reload(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        report = ask_as(client, "mcpd/reload", ReloadReport)
    # A server restarted though its table did not change says why: nothing the user
    # changed in the file explains it.
    changed = [
        f"{alias} (restarted: {visible(report.why[alias])})" if alias in report.why else alias
        for alias in report.changed
    ]
    servers = report.added, report.removed, changed, report.unchanged
    said = zip(("added", "removed", "changed", "unchanged"), servers, strict=True)
    print("reloaded: " + ", ".join(f"{k} {', '.join(v) or '-'}" for k, v in said))
    if report.settings:
        print(f"in force now: {', '.join(report.settings)}")
    if report.new_connections:
        # A connection open keeps what it was opened with.
        print(f"for new connections: {', '.join(report.new_connections)}")
    if report.restart:
        # Said here too, not only in the log: a user who changed them waits for nothing.
        print(f"not applied until mcpd restarts: {', '.join(report.restart)}")
    return 0


def cmd_reset(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        out = ask_as(client, "mcpd/reset", ResetOutcome, {"server": args.server})
    server, was, circuit = visible(out.server), visible(out.was), visible(out.circuit)
    said = (
        f"{server}: circuit closed on trial (was {circuit})"
        if out.reset
        else f"{server}: its circuit is closed already"
    )
    if out.waiting:
        # Refused for the restart's wait, not the circuit's: reset leaves that one.
        state = visible(out.state)
        next_try = out.next_try
        when = f" (next try at {visible(next_try)})" if next_try not in (None, "-") else ""
        print(
            f"{said}; but the server is {state}, not connected: calls are refused until "
            f"it is started or connected again{when}. That wait is the restart's, which "
            "reset does not end: a change to its entry and `mcpd reload`, or a restart "
            "of mcpd, ends it"
        )
    elif out.reset:
        print(f"{said}; its next call decides")
    else:
        print(f"{said} ({was}); nothing to reset")
    return 0


def cmd_bridge(args: argparse.Namespace) -> int:
    from ..agents.bridge.relay import run_bridge

    return run_bridge(client_socket_path(args.socket), args.profile)
