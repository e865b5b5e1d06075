"""``mcpd approvals``: the calls waiting for a person, and deciding them.

``mcpd approvals`` lists them, each with its arguments at a glance (every key, long
values shortened where they stand); ``mcpd approvals show ID`` prints one call's
arguments whole; ``mcpd approvals approve ID`` and ``mcpd approvals deny ID [--reason
TEXT]`` decide one; ``--watch`` shows the list again each time it changes, until
Ctrl-C. What the agents asked is shown as it is, made visible: a tool name comes from a
server and arguments from an agent, and neither may drive the terminal.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime

import msgspec

from protocol.jsonrpc.messages import JsonObject
from protocol.shown.visible import visible

from ..approval_answers import ApprovalDecided, ApprovalShown, ApprovalsListing
from ..policy.agent import AgentInfo
from ..status_document import PendingView
from .client import JSON_HELP, QUICK, SOCKET_HELP, socket_path
from .exits import EXIT_USAGE, ask_as, client_for, fail

ACTIONS = ("show", "approve", "deny")


def add_approvals(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ap = sub.add_parser("approvals", help="list the calls waiting for approval, or decide one")
    ap.add_argument("--socket", type=socket_path, help=SOCKET_HELP)
    ap.add_argument(
        "action",
        nargs="?",
        choices=ACTIONS,
        metavar="show|approve|deny",
        help="show the call ID with its arguments whole, or approve or deny it",
    )
    ap.add_argument("id", nargs="?", metavar="ID", help="the call's id, as the list shows it")
    ap.add_argument("--reason", metavar="TEXT", help="with deny: why (the agent is told)")
    ap.add_argument("--watch", action="store_true", help="show the list again at each change")
    ap.add_argument("--json", action="store_true", help=JSON_HELP)
    ap.set_defaults(func=cmd_approvals)


def cmd_approvals(args: argparse.Namespace) -> int:
    if args.action is not None and args.id is None:
        fail(EXIT_USAGE, f"mcpd approvals {args.action} needs the call's ID")
    if args.reason is not None and args.action != "deny":
        fail(EXIT_USAGE, "--reason goes with deny")
    if args.action is not None and args.watch:
        fail(EXIT_USAGE, "--watch lists; it does not go with show, approve or deny")
    if args.action == "show":
        return _show(args)
    if args.action is not None:
        return _decide(args)
    if args.watch:
        return _watch(args)
    with client_for(args, QUICK) as client:
        listing = ask_as(client, "mcpd/approvals/list", ApprovalsListing)
    if args.json:
        print(json.dumps(msgspec.to_builtins(listing.approvals), indent=2))
    else:
        print(render_approvals(listing.approvals))
    return 0


def _decide(args: argparse.Namespace) -> int:
    params: JsonObject = {"id": args.id, "approve": args.action == "approve"}
    if args.reason is not None:
        params["reason"] = args.reason
    with client_for(args, QUICK) as client:
        done = ask_as(client, "mcpd/approvals/decide", ApprovalDecided, params, code=False)
    if args.json:
        print(json.dumps(msgspec.to_builtins(done), indent=2))
        return 0
    item = done.decided
    word = "approved" if done.approved else "denied"
    print(f"{word} {visible(item.id)}: {_tool(item)} for {_agent(item.agent)}")
    return 0


def _show(args: argparse.Namespace) -> int:
    with client_for(args, QUICK) as client:
        shown = ask_as(client, "mcpd/approvals/show", ApprovalShown, {"id": args.id}, code=False)
    if args.json:
        print(json.dumps(msgspec.to_builtins(shown), indent=2))
        return 0
    item = shown.approval
    print(f"{visible(item.id)}: {_tool(item)} for {_agent(item.agent)}")
    if item.reason:
        print(f"why it asks: {visible(item.reason)}")
    # Line by line, so that the lines are the arguments' own (written out by mcpd, one
    # member or item a line) and none of what the agent chose can write one.
    print("arguments:")
    for line in shown.arguments.split("\n"):
        print(f"  {visible(line)}")
    return 0


def _watch(args: argparse.Namespace) -> int:
    tty = sys.stdout.isatty()
    version = -1
    shown: list[PendingView] | None = None
    try:
        with client_for(args) as client:
            while True:
                listing = ask_as(
                    client, "mcpd/approvals/watch", ApprovalsListing, {"after": version}
                )
                version = listing.version
                if listing.approvals == shown:
                    continue  # nothing a person would see changed: ask again
                shown = listing.approvals
                if args.json:
                    print(json.dumps(msgspec.to_builtins(listing.approvals)), flush=True)
                    continue
                stamp = datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S")
                body = f"mcpd approvals    {stamp}\n\n{render_approvals(listing.approvals)}\n"
                # On a terminal the list is redrawn in place; elsewhere each follows the last.
                sys.stdout.write(f"\x1b[H\x1b[2J{body}" if tty else f"{body}\n")
                sys.stdout.flush()
    except KeyboardInterrupt:
        return 0


def render_approvals(items: list[PendingView]) -> str:
    if not items:
        return "no call waits for approval"
    now = datetime.now(UTC)
    rows = []
    for item in items:
        waited = now - datetime.fromisoformat(item.since)
        left = datetime.fromisoformat(item.deadline) - now
        rows.append(
            (
                visible(item.id),
                f"{max(0, int(waited.total_seconds()))} s",
                f"{max(0, int(left.total_seconds()))} s",
                _agent(item.agent),
                _tool(item),
            )
        )
    widths = [max(len(r[i]) for r in [_HEAD, *rows]) for i in range(len(_HEAD))]
    lines = []
    for n, row in enumerate([_HEAD, *rows]):
        lines.append("  ".join(f"{cell:<{widths[i]}}" for i, cell in enumerate(row)).rstrip())
        if n:
            lines += _arguments(items[n - 1])
    reasons = [f"{visible(i.id)}: {visible(i.reason)}" for i in items if i.reason]
    if reasons:
        lines += ["", "why they ask:", *[f"  {r}" for r in reasons]]
    lines.append(f"{len(items)} waiting; decide with mcpd approvals approve|deny ID")
    return "\n".join(lines)


def _arguments(item: PendingView) -> list[str]:
    """A call's arguments under its row: at a glance, every key shown where they fit
    (the terminal folds the line; nothing is cut to its width), and what to run where
    part of them is not shown."""
    shown = f"  {visible(item.arguments)}"
    whole = f"mcpd approvals show {visible(item.id)}"
    left_out = item.keys_left_out
    if left_out:
        return [
            shown,
            f"  ({left_out} keys do not fit here: {whole} shows them all; read them before"
            " you approve it)",
        ]
    if item.shortened:
        return [shown, f"  (long values are shortened where they stand: {whole} shows them whole)"]
    return [shown]


_HEAD = ("ID", "WAITING", "LEFT", "AGENT", "TOOL")


def _agent(agent: AgentInfo) -> str:
    parts = []
    if agent.pid is not None:
        exe = f" ({visible(agent.exe)})" if agent.exe else ""
        parts.append(f"pid {agent.pid}{exe}")
    if agent.uid is not None:
        parts.append(f"uid {agent.uid}")
    if not parts:
        parts.append(f"connection {visible(agent.connection or '?')}")
    parts.append(visible(agent.profile or "default"))
    return ", ".join(parts)


def _tool(item: PendingView) -> str:
    return f"{visible(item.server)}/{visible(item.original)}"
