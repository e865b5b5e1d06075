"""``mcpd status`` for people: one line per server, reasons and retry times in local time."""

from __future__ import annotations

from datetime import datetime

from msgspec import UnsetType

from protocol.shown.server_urls import ascii_hosts
from protocol.shown.visible import visible

from ..server_row import ServerRow
from ..status_document import ProfileStatus, StatusDocument

_COLORS = {
    "ready": "32",
    "idle": "2;32",
    "degraded": "33",
    "starting": "36",
    "half_open": "33",
    "open": "31",
    "failed": "31",
    "unreachable": "31",
    "crash_loop": "1;31",
    "needs_login": "35",
    "unresolved": "1;31",
    "stopped": "90",
}


def local_time(iso: str | None) -> str:
    if not iso:
        return "-"
    try:
        at = datetime.fromisoformat(iso).astimezone()
    except (ValueError, OverflowError):  # not a date, or none a clock here can show
        return visible(iso)
    # A retry a day away must not read as a time just past.
    return at.strftime("%H:%M:%S" if at.date() == datetime.now().date() else "%Y-%m-%d %H:%M:%S")


def _paint(text: str, state: str, color: bool) -> str:
    code = _COLORS.get(state)
    return f"\x1b[{code}m{text}\x1b[0m" if color and code else text


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def render_status(status: StatusDocument, *, color: bool = False) -> str:
    d = status.daemon
    # An agent in a profile is shown its profile, not the daemon's pid and socket.
    where = f"(pid {_or_unknown(d.pid)}) on {_or_unknown(d.socket)}"
    if not isinstance(d.profile, UnsetType):
        where = f"(profile {d.profile})"
    lines = [
        f"mcpd {d.version} {where} — {visible(d.summary)}; {_counted(d.tools, 'tool')}, "
        f"{_counted(d.prompts, 'prompt')}, {_counted(d.resources, 'resource')}, "
        f"{d.connections} agent connection(s)"
    ]
    for warning in d.warnings:
        lines.append(_paint(f"warning: {visible(warning)}", "degraded", color))
    for unsaved in d.unsaved or []:
        text = (
            f"cannot save the {unsaved.what} to {unsaved.path} since "
            f"{local_time(unsaved.since)} ({unsaved.problem}): {unsaved.meaning}"
        )
        lines.append(_paint(visible(text), "degraded", color))
    if d.held:
        held = f"{d.held} item{'s wait' if d.held != 1 else ' waits'}"
        lines.append(_paint(f"held: {held} for approval (mcpd tools --pending)", "degraded", color))
    header = (
        f"{'SERVER':<16} {'STATE':<11} {'ERA':<7} {'TOOLS':>5} {'PRMPT':>5} {'RES':>4} "
        f"{'SINCE':>8} {'RETRY':>8} {'CALLS':>6} {'P50ms':>7} {'P99ms':>7}  LAST ERROR"
    )
    lines.append(header)
    for s in status.servers:
        lines += _server_lines(s, whole=isinstance(d.profile, UnsetType), color=color)
    if len(status.profiles) > 1 or any(p.warning for p in status.profiles):
        lines += profile_lines(status.profiles, color)
    if d.http:
        lines.append(f"HTTP endpoint: {d.http} (bearer token: `mcpd token`)")
    waiting = status.approvals or []
    if waiting:
        oldest = local_time(waiting[0].since)
        text = f"{len(waiting)} call(s) wait for approval, since {oldest}: `mcpd approvals`"
        lines.append(_paint(text, "degraded", color))
    if not isinstance(status.audit, UnsetType) and status.audit.dropped:
        dropped = status.audit.dropped
        lines.append(f"audit log: {dropped} records not written (the writer fell behind)")
    return "\n".join(lines)


def _or_unknown(value: str | int | UnsetType) -> str:
    return "?" if isinstance(value, UnsetType) else str(value)


def _server_lines(s: ServerRow, *, whole: bool, color: bool) -> list[str]:
    """A server's line, and under it what there is to say of it."""
    state = s.state
    p50 = "-" if s.p50_ms is None else f"{s.p50_ms:.1f}"
    p99 = "-" if s.p99_ms is None else f"{s.p99_ms:.1f}"
    era = s.era or "-"
    retry = local_time(s.retry_at) if state not in ("ready", "degraded") else "-"
    # Its first line, once a carriage return in it can no longer start another.
    error = ascii_hosts(visible(s.last_error or "", lines=True).partition("\n")[0])
    line = (
        f"{visible(s.alias):<16} {_paint(f'{state:<11}', state, color)} {era:<7} "
        f"{s.tools:>5} {s.prompts:>5} {_resources(s):>4} "
        f"{local_time(s.since):>8} {retry:>8} "
        f"{s.calls:>6} {p50:>7} {p99:>7}  {error}"
    )
    lines = [line.rstrip()]
    if state not in ("ready", "degraded", "starting", "idle"):
        for tail in s.stderr or []:
            lines.append(f"{'':<16} stderr| {visible(tail)}")
    notes = trim_notes(s) + pin_notes(s, whole=whole) + masked_notes(s) + held_notes(s)
    lines += [f"{'':<16} {visible(note)}" for note in notes]
    for warning in s.warnings:
        lines.append(_paint(f"{'':<16} warning| {visible(warning)}", "degraded", color))
    if not isinstance(s.sandbox, UnsetType) and s.sandbox.unprotected:
        unprotected = visible(s.sandbox.unprotected)
        lines.append(_paint(f"{'':<16} unprotected| {unprotected}", "degraded", color))
    return lines


def profile_lines(profiles: list[ProfileStatus], color: bool = False) -> list[str]:
    """What each profile exposes: its tools, what its agents are listed, how many use it."""
    lines = [f"{'PROFILE':<16} {'DISCOVERY':<14} {'TOOLS':>5} {'LISTED':>6} {'AGENTS':>6}  NAMES"]
    for p in profiles:
        mode = p.discovery
        if mode == "auto":
            mode = f"auto ({p.mode})"
        names = f"{p.naming.template} <= {p.naming.max_length}"
        if p.socket:
            names += f"  on {p.socket}"
        lines.append(f"{p.name:<16} {mode:<14} {p.tools:>5} {p.listed:>6} {p.agents:>6}  {names}")
        for said in (p.warning, p.socket_error):
            if said:
                lines.append(_paint(f"warning: {visible(said)}", "degraded", color))
    return lines


_TRIMS_SHOWN = 5


def trim_notes(server: ServerRow) -> list[str]:
    """What the server's lists left out or cut, and why: the first few, then a count."""
    dropped = {
        "tools": server.dropped_tools,
        "prompts": server.dropped_prompts,
        "resources": server.dropped_resources,
        "resource templates": server.dropped_resource_templates,
    }
    notes = [f"dropped {kind}| {why}" for kind, whys in dropped.items() for why in whys]
    notes += [f"cut| {why}" for why in server.cut]
    if len(notes) > _TRIMS_SHOWN:
        more = len(notes) - _TRIMS_SHOWN + 1
        notes[_TRIMS_SHOWN - 1 :] = [f"... and {more} more (mcpd status --json lists them)"]
    return notes


def pin_notes(server: ServerRow, *, whole: bool) -> list[str]:
    """What of the server is held until approved, and what the rules found. ``whole``:
    the status is the whole daemon's, read by its own user on its own socket, where
    approving and listing findings answer; a profile's view is read where they are
    refused (a profile's socket, or another user), so it says where they answer."""
    notes = []
    there = "" if whole else ", on mcpd's own socket, for its own user"
    if server.held:
        notes.append(
            f"held| {server.held} item(s) wait for approval: mcpd approve {server.alias}{there}"
        )
    if server.findings:
        notes.append(f"findings| {server.findings} item(s) flagged: mcpd tools --findings{there}")
    return notes


def login_lines(servers: list[ServerRow]) -> list[str]:
    """Under a listing of tools, the ``servers`` that wait for a login: none of their
    tools is listed until someone logs in."""
    return [
        f"{visible(s.alias)} waits for a login, so none of its tools is "
        f"listed: mcpd auth login {visible(s.alias)}"
        for s in servers
        if s.state == "needs_login"
    ]


def masked_notes(server: ServerRow) -> list[str]:
    """How many of mcpd's secrets the server sent, masked, and whose they were."""
    masked = server.secrets_masked
    if not masked:
        return []
    whose = ", ".join(f"{where} ({n})" for where, n in sorted(masked.items()))
    return [f"secrets masked| {sum(masked.values())} in what it sent: {whose}"]


def held_notes(server: ServerRow) -> list[str]:
    """Why mcpd reads what the server sends more slowly than it comes, while it does."""
    held = server.held_back
    if held is None:
        return []
    return [f"held back| since {local_time(held.since)}: {held.reason}"]


def _resources(server: ServerRow) -> str:
    """Resources, with templates after a plus: ``7+2``."""
    resources, templates = server.resources, server.resource_templates
    return f"{resources}+{templates}" if templates else str(resources)


def watch_frame(body: str, interval: float, *, clear: bool) -> str:
    """One refresh of ``mcpd status --watch``: on a terminal the screen is redrawn in
    place; otherwise each snapshot follows the last after a blank line."""
    stamp = datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S")
    title = f"every {interval:g} s: mcpd status    {stamp}"
    if clear:
        return f"\x1b[H\x1b[2J{title}\n\n{body}\n"
    return f"{title}\n{body}\n\n"
