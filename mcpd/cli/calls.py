"""``mcpd calls``: the audit log, read from the state directory (the daemon need not
be running), narrowed by time, server, tool, agent and failure.

The state directory is the one the config in use names (``--config``, else
``$MCPD_CONFIG``, else the running daemon's, else the default), as for ``mcpd token``.
What agents and servers wrote (names, reasons) is made visible before it is printed,
in the table and in the JSON lines. A file under the log's names that mcpd would not
have written (not a regular file, another user's) is not read: it is named, the rest is
shown, and the exit status says the log was not read whole.
"""

from __future__ import annotations

import argparse
import os
import pwd
import re
import sys
import time
from collections import deque
from datetime import datetime
from typing import Final

import msgspec
from msgspec import UNSET, UnsetType

from protocol.shown.visible import visible, visible_json

from ..audit.reader import AuditRecords, Choice
from ..audit.record import CallRecord
from ..config.loading.load import load
from ..config.tables.model import Config, ConfigError
from .client import Untrusted, config_in_use, config_in_use_help
from .exits import EXIT_FAILED, EXIT_UNREACHABLE, EXIT_USAGE, fail, fail_config

_AGO: Final = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*(s|m|min|h|d)\Z")
_SECONDS: Final = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def add_calls(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    c = sub.add_parser("calls", help="show the audit log: the calls agents made")
    c.add_argument(
        "--since",
        metavar="WHEN",
        help="only calls since then: 90s, 30m, 1h, 2d ago, or a date and time "
        "(2026-08-01T10:00, local time)",
    )
    c.add_argument("--server", metavar="ALIAS", help="only calls to this server (a glob)")
    c.add_argument(
        "--tool", metavar="NAME", help="only calls of this tool: the agent's name or ALIAS/NAME"
    )
    c.add_argument(
        "--agent", metavar="PID|UID", help="only calls of this process or user (or a user name)"
    )
    c.add_argument("--failed", action="store_true", help="only calls that did not succeed")
    c.add_argument("--json", action="store_true", help="the records as JSON lines")
    c.add_argument("--last", type=int, default=100, metavar="N", help="the last N records (0: all)")
    c.add_argument("--config", help=f"config file (default: {config_in_use_help()})")
    c.set_defaults(func=cmd_calls)


def cmd_calls(args: argparse.Namespace) -> int:
    choice = Choice(
        since=None if args.since is None else since(args.since),
        server=args.server,
        tool=args.tool,
        failed=args.failed,
    )
    if args.agent is not None:
        choice = _agent(args.agent, choice)
    compiled = choice.compiled()
    if args.last < 0:
        fail(EXIT_USAGE, "--last must be 0 (all) or more")
    directory = _state_dir(args.config)
    kept: deque[CallRecord] = deque(maxlen=args.last or None)
    seen = 0  # calls: a summary record stands for many
    begins: float | None = None  # the oldest record's time: the log holds none before
    try:
        reading = AuditRecords(directory)
        if not reading.files:
            print(f"mcpd: no audit log in {directory} yet", file=sys.stderr)
            return 0
        for record in reading:
            if begins is None:
                begins = record.ts
            seen += record.calls
            if compiled.admits(record):
                kept.append(record)
    except OSError as exc:
        fail(EXIT_FAILED, f"cannot read the audit log in {directory}: {exc.strerror or exc}")
    if args.json:
        for record in kept:
            # A program decodes the same record; a terminal gets no escape of anyone's.
            sys.stdout.write(visible_json(msgspec.json.encode(record)).decode() + "\n")
    else:
        print(render_calls(list(kept)))
        shown = sum(record.calls for record in kept)
        print(f"{shown} of {seen} calls in {directory}{_begins(begins, reading)}", file=sys.stderr)
    if reading.dropped:
        print(
            f"mcpd: {reading.dropped} calls were not written (the log fell behind)",
            file=sys.stderr,
        )
    if reading.lost:
        span = " to ".join(
            datetime.fromtimestamp(t).strftime("%H:%M:%S")
            for t in (reading.lost_from, reading.lost_until)
        )
        print(
            f"mcpd: {reading.lost} calls were lost from {span}: the log could not be written",
            file=sys.stderr,
        )
    if reading.unreadable:
        print(f"mcpd: {reading.unreadable} lines could not be read", file=sys.stderr)
    for why in reading.refused:
        print(f"mcpd: {why}", file=sys.stderr)
    # What was read is shown; a file left unread makes it not the whole log.
    return EXIT_FAILED if reading.refused else 0


def _begins(ts: float | None, reading: AuditRecords) -> str:
    """Where the log begins: the files keep only the latest of it, so a count read
    alone would seem to be of every call ever made."""
    if ts is None:
        return ""
    at = datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")
    if len(reading.files) < 2:
        return f", the log beginning at {at}"
    return (
        f", the log beginning at {at}: older records are rotated away as it grows "
        "(audit_max_bytes, audit_files)"
    )


def since(text: str, now: float | None = None) -> float:
    """``--since``: a duration ago, or a local date and time, as Unix time."""
    now = time.time() if now is None else now
    m = _AGO.match(text.strip())
    if m is not None:
        return now - float(m.group(1)) * _SECONDS[m.group(2)]
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        fail(EXIT_USAGE, f"--since {text!r}: give a duration (90s, 30m, 1h, 2d) or a date")


def _agent(text: str, choice: Choice) -> Choice:
    """``choice`` narrowed by ``--agent``: a number to the process or the user of that
    number, a user name to that user's calls only."""
    try:
        if text.isascii() and text.isdigit():
            return msgspec.structs.replace(choice, agent=int(text))  # too many digits: ValueError
        return msgspec.structs.replace(choice, uid=pwd.getpwnam(text).pw_uid)
    except (KeyError, ValueError):
        fail(EXIT_USAGE, f"--agent {text!r}: not a pid, a uid or a user name")


def _state_dir(explicit: str | None) -> str:
    from ..local.state.statefile import state_dir

    try:
        in_use = config_in_use(explicit)
    except Untrusted as exc:
        fail(EXIT_UNREACHABLE, str(exc))
    if in_use.state_dir is not None:
        return in_use.state_dir  # the running daemon's, whatever file it was started with
    path = in_use.path
    try:
        config = load(path)
    except ConfigError as exc:
        if explicit or os.path.exists(path):
            fail_config(f"config error: {exc}")
        config = Config()  # no config file: the default state directory
    return state_dir(config)


def render_calls(records: list[CallRecord]) -> str:
    head = ("TIME", "AGENT", "SERVER", "TOOL", "DECISION", "OUTCOME", "MS")
    today = datetime.now().date()
    rows = [head]
    for r in records:
        at = datetime.fromtimestamp(r.ts)
        when = at.strftime("%H:%M:%S") if at.date() == today else at.strftime("%m-%d %H:%M")
        a = r.agent
        agent = f"pid {a.pid}" if a.pid is not None else f"conn {a.connection}"
        if a.exe:
            agent += f" ({a.exe})"
        by = r.decided_by
        decision = r.decision if by in ("default", "") else f"{r.decision} {by}"
        summed = r.count is not UNSET
        rows.append(
            (
                when,
                visible(agent),
                visible(r.server or "-"),
                visible(r.name or "-"),
                visible(decision),
                f"{r.outcome} \u00d7{r.calls}" if summed else r.outcome,
                "-" if summed else f"{r.duration_ms:.0f}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = []
    for row in rows:
        cells = [f"{row[i]:<{widths[i]}}" for i in range(len(head) - 1)]
        lines.append("  ".join([*cells, f"{row[-1]:>{widths[-1]}}"]))
    reasons = [
        f"  {datetime.fromtimestamp(r.ts).strftime('%H:%M:%S')} {visible(r.name or '-')}: "
        f"{visible(r.reason)}"
        for r in records
        if r.reason and r.failed
    ]
    if reasons:
        lines += ["", "why:", *reasons]
    summaries = [_summed(r) for r in records if r.count is not UNSET]
    if summaries:
        lines += ["", "counted, not recorded one by one (past their agent's budget):", *summaries]
    return "\n".join(lines)


def _summed(r: CallRecord) -> str:
    """What a summary record stands for: ``  10:02:11 to 10:02:14: 59663 tools/call of
    pid 4242 (claude), the first mcp__x``."""
    last = r.ts if isinstance(r.last_ts, UnsetType) else r.last_ts
    span = " to ".join(datetime.fromtimestamp(t).strftime("%H:%M:%S") for t in (r.ts, last))
    agent = visible(r.agent.label())
    return f"  {span}: {r.calls} {r.method} of {agent}, the first {visible(r.name or '-')}"
