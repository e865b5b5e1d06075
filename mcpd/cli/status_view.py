"""``mcpd status`` for people: one line per server, reasons and retry times in local time."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from protocol.shown.server_urls import ascii_hosts
from protocol.shown.visible import visible

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
    except ValueError:
        return iso
    # A retry a day away must not read as a time just past.
    return at.strftime("%H:%M:%S" if at.date() == datetime.now().date() else "%Y-%m-%d %H:%M:%S")


def _paint(text: str, state: str, color: bool) -> str:
    code = _COLORS.get(state)
    return f"\x1b[{code}m{text}\x1b[0m" if color and code else text


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def render_status(status: dict[str, Any], *, color: bool = False) -> str:
    d = status.get("daemon", {})
    # An agent in a profile is shown its profile, not the daemon's pid and socket.
    where = f"(pid {d.get('pid', '?')}) on {d.get('socket', '?')}"
    if "profile" in d:
        where = f"(profile {d['profile']})"
    lines = [
        f"mcpd {d.get('version', '?')} {where} — {visible(d.get('summary', ''))}; "
        f"{_counted(d.get('tools', 0), 'tool')}, "
        + (
            f"{_counted(d['prompts'], 'prompt')}, {_counted(d['resources'], 'resource')}, "
            if "prompts" in d
            else ""
        )
        + f"{d.get('connections', 0)} agent connection(s)"
    ]
    for warning in d.get("warnings") or []:
        lines.append(_paint(f"warning: {visible(warning)}", "degraded", color))
    for unsaved in d.get("unsaved") or []:
        text = (
            f"cannot save the {unsaved.get('what')} to {unsaved.get('path')} since "
            f"{local_time(unsaved.get('since'))} ({unsaved.get('problem')}): "
            f"{unsaved.get('meaning')}"
        )
        lines.append(_paint(visible(text), "degraded", color))
    if d.get("held"):
        held = f"{d['held']} item{'s wait' if d['held'] != 1 else ' waits'}"
        lines.append(_paint(f"held: {held} for approval (mcpd tools --pending)", "degraded", color))
    header = (
        f"{'SERVER':<16} {'STATE':<11} {'ERA':<7} {'TOOLS':>5} {'PRMPT':>5} {'RES':>4} "
        f"{'SINCE':>8} {'RETRY':>8} {'CALLS':>6} {'P50ms':>7} {'P99ms':>7}  LAST ERROR"
    )
    lines.append(header)
    for s in status.get("servers", []):
        state = s.get("state", "?")
        p50 = "-" if s.get("p50_ms") is None else f"{s['p50_ms']:.1f}"
        p99 = "-" if s.get("p99_ms") is None else f"{s['p99_ms']:.1f}"
        era = s.get("era") or "-"
        retry = local_time(s.get("retry_at")) if state not in ("ready", "degraded") else "-"
        # Its first line, once a carriage return in it can no longer start another.
        error = ascii_hosts(visible(s.get("last_error") or "", lines=True).partition("\n")[0])
        line = (
            f"{visible(s.get('alias', '?')):<16} {_paint(f'{state:<11}', state, color)} {era:<7} "
            f"{s.get('tools', 0):>5} {s.get('prompts', 0):>5} {_resources(s):>4} "
            f"{local_time(s.get('since')):>8} {retry:>8} "
            f"{s.get('calls', 0):>6} {p50:>7} {p99:>7}  {error}"
        )
        lines.append(line.rstrip())
        if state not in ("ready", "degraded", "starting", "idle"):
            for tail in s.get("stderr") or []:
                lines.append(f"{'':<16} stderr| {visible(tail)}")
        notes = trim_notes(s) + pin_notes(s, whole="profile" not in d)
        notes += masked_notes(s) + held_notes(s)
        lines += [f"{'':<16} {visible(note)}" for note in notes]
        for warning in s.get("warnings") or []:
            lines.append(_paint(f"{'':<16} warning| {visible(warning)}", "degraded", color))
        unprotected = (s.get("sandbox") or {}).get("unprotected")
        if unprotected:
            lines.append(_paint(f"{'':<16} unprotected| {visible(unprotected)}", "degraded", color))
    profiles = status.get("profiles") or []
    if len(profiles) > 1 or any(p.get("warning") for p in profiles):
        lines += profile_lines(profiles, color)
    if d.get("http"):
        lines.append(f"HTTP endpoint: {d['http']} (bearer token: `mcpd token`)")
    waiting = status.get("approvals") or []
    if waiting:
        oldest = local_time(waiting[0].get("since"))
        text = f"{len(waiting)} call(s) wait for approval, since {oldest}: `mcpd approvals`"
        lines.append(_paint(text, "degraded", color))
    dropped = (status.get("audit") or {}).get("dropped")
    if dropped:
        lines.append(f"audit log: {dropped} records not written (the writer fell behind)")
    return "\n".join(lines)


def profile_lines(profiles: list[dict[str, Any]], color: bool = False) -> list[str]:
    """What each profile exposes: its tools, what its agents are listed, how many use it."""
    lines = [f"{'PROFILE':<16} {'DISCOVERY':<14} {'TOOLS':>5} {'LISTED':>6} {'AGENTS':>6}  NAMES"]
    for p in profiles:
        mode = p.get("discovery", "all")
        if mode == "auto":
            mode = f"auto ({p.get('mode')})"
        naming = p.get("naming") or {}
        names = f"{naming.get('template', '?')} <= {naming.get('max_length', '?')}"
        if p.get("socket"):
            names += f"  on {p['socket']}"
        lines.append(
            f"{p.get('name', '?'):<16} {mode:<14} {p.get('tools', 0):>5} "
            f"{p.get('listed', 0):>6} {p.get('agents', 0):>6}  {names}"
        )
        for key in ("warning", "socket_error"):
            if p.get(key):
                lines.append(_paint(f"warning: {visible(p[key])}", "degraded", color))
    return lines


_TRIMS_SHOWN = 5
_TRIMMED = ("tools", "prompts", "resources", "resource_templates")


def trim_notes(server: dict[str, Any]) -> list[str]:
    """What the server's lists left out or cut, and why: the first few, then a count."""
    notes = [
        f"dropped {kind.replace('_', ' ')}| {why}"
        for kind in _TRIMMED
        for why in server.get(f"dropped_{kind}") or []
    ]
    notes += [f"cut| {why}" for why in server.get("cut") or []]
    if len(notes) > _TRIMS_SHOWN:
        more = len(notes) - _TRIMS_SHOWN + 1
        notes[_TRIMS_SHOWN - 1 :] = [f"... and {more} more (mcpd status --json lists them)"]
    return notes


def pin_notes(server: dict[str, Any], *, whole: bool) -> list[str]:
    """What of the server is held until approved, and what the rules found. ``whole``:
    the status is the whole daemon's, read by its own user on its own socket, where
    approving and listing findings answer; a profile's view is read where they are
    refused (a profile's socket, or another user), so it says where they answer."""
    alias = server.get("alias", "?")
    notes = []
    held, found = server.get("held", 0), server.get("findings", 0)
    there = "" if whole else ", on mcpd's own socket, for its own user"
    if held:
        notes.append(f"held| {held} item(s) wait for approval: mcpd approve {alias}{there}")
    if found:
        notes.append(f"findings| {found} item(s) flagged: mcpd tools --findings{there}")
    return notes


def login_lines(status: dict[str, Any]) -> list[str]:
    """Under a listing of tools, the servers of ``status`` that wait for a login: none
    of their tools is listed until someone logs in."""
    return [
        f"{visible(str(s.get('alias', '?')))} waits for a login, so none of its tools is "
        f"listed: mcpd auth login {visible(str(s.get('alias', '?')))}"
        for s in status.get("servers") or []
        if s.get("state") == "needs_login"
    ]


def masked_notes(server: dict[str, Any]) -> list[str]:
    """How many of mcpd's secrets the server sent, masked, and whose they were."""
    masked: dict[str, int] = server.get("secrets_masked") or {}
    if not masked:
        return []
    whose = ", ".join(f"{where} ({n})" for where, n in sorted(masked.items()))
    return [f"secrets masked| {sum(masked.values())} in what it sent: {whose}"]


def held_notes(server: dict[str, Any]) -> list[str]:
    """Why mcpd reads what the server sends more slowly than it comes, while it does."""
    held = server.get("held_back")
    if not held:
        return []
    return [f"held back| since {local_time(held.get('since'))}: {held.get('reason', '?')}"]


def _resources(server: dict[str, Any]) -> str:
    """Resources, with templates after a plus: ``7+2``."""
    resources, templates = server.get("resources", 0), server.get("resource_templates", 0)
    return f"{resources}+{templates}" if templates else str(resources)


def watch_frame(body: str, interval: float, *, clear: bool) -> str:
    """One refresh of ``mcpd status --watch``: on a terminal the screen is redrawn in
    place; otherwise each snapshot follows the last after a blank line."""
    stamp = datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S")
    title = f"every {interval:g} s: mcpd status    {stamp}"
    if clear:
        return f"\x1b[H\x1b[2J{title}\n\n{body}\n"
    return f"{title}\n{body}\n\n"
