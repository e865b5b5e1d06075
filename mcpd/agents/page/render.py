"""The page as HTML, drawn on the daemon: readable without a script, and in parts
(``regions``) that the page's script swaps in as they change.

Every word a server, an agent or a config supplies is escaped where it is written;
nothing on the page is a secret (no token, no URL's credentials or query).
"""

from __future__ import annotations

from datetime import datetime
from html import escape
from typing import Final
from urllib.parse import quote

from msgspec import UnsetType

from protocol.shown.visible import visible

from ...servers.shared import DAY, ServerHistory, ServerRow
from ...status_document import ProfileStatus
from . import charts, decisions
from .assets import ICON, SCRIPT, STYLE
from .model import PageData, profile_use
from .words import on_page

_RECENT: Final = 5  # minutes that calls per minute is averaged over
_DOT: Final = " \u00b7 "


def regions(data: PageData) -> dict[str, str]:
    """Each changing part of the page, and the document's title."""
    s = data.status
    out = {
        "title": f"mcpd \u00b7 {visible(s.daemon.summary)}",  # set as text
        "summary": _summary(data),
        "waiting": _waiting(data),
        "rows": "".join(_server(data, row) for row in s.servers),
        "agents": _agents(s.profiles),
        "footer": _footer(data),
    }
    if data.calls is not None:
        out["calls"] = decisions.calls_section(data)
    return out


def page(data: PageData) -> str:
    parts = regions(data)
    csrf = f'<meta name="mcpd-csrf" content="{on_page(data.csrf)}">' if data.csrf else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f'<meta name="color-scheme" content="light dark">{csrf}'
        f"<title>{on_page(parts['title'])}</title>"
        f'<link rel="icon" href="{ICON}"><style>{STYLE}</style></head><body>'
        f'<header><h1>mcpd</h1><p id="summary">{parts["summary"]}</p>'
        '<span id="live" class="live off">reload for the latest</span></header><main>'
        f'<section id="waiting" aria-live="polite">{parts["waiting"]}</section>'
        '<section><h2>Servers</h2><table class="servers"><thead><tr>'
        "<th>Server</th><th>State</th><th>Breaker</th>"
        '<th class="n">Restarts</th><th class="n">Calls/min</th>'
        '<th class="n">p50 / p95</th><th class="n">Errors</th>'
        "<th>Last hour</th><th>Last 24 hours</th></tr></thead>"
        f'<tbody id="rows">{parts["rows"]}</tbody></table></section>'
        + (f'<section id="calls">{parts["calls"]}</section>' if "calls" in parts else "")
        + f'<section id="agents">{parts["agents"]}</section></main>'
        f'<footer id="footer">{parts["footer"]}</footer>'
        f"<script>{SCRIPT}</script></body></html>"
    )


def message(title: str, text: str, *, back: bool = True) -> str:
    """A small page of its own: a refusal, or what became of a login."""
    link = '<p><a href="/">Back to the status page</a></p>' if back else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f'<title>mcpd \u00b7 {on_page(title)}</title><link rel="icon" href="{ICON}">'
        f"<style>{STYLE}</style></head><body><main><section><h2>{on_page(title)}</h2>"
        f"<p>{text}</p>{link}</section></main></body></html>"
    )


def _summary(data: PageData) -> str:
    d = data.status.daemon
    out = on_page(d.summary)
    if not isinstance(d.profile, UnsetType):
        out += f' <span class="muted">(profile {on_page(d.profile)})</span>'
    for warning in d.warnings:
        out += f'<span class="warning">{on_page(warning)}</span>'
    return out


def _waiting(data: PageData) -> str:
    items = decisions.approval_items(data) + decisions.held_items(data)
    for row in data.status.servers:
        if row.state == "needs_login":
            items.append(_login_item(data, row))
        elif row.state == "unresolved":
            items.append(
                f'<li><span class="name">{on_page(row.alias)}</span>'
                f'<span class="pill person">cannot start</span>'
                f'<span class="why">{on_page(row.last_error or "")}</span>'
                "<small>fix the configuration, then <code>mcpd reload</code></small></li>"
            )
    head = "<h2>Waiting for you</h2>"
    if data.look_only is not None:
        head += f'<p id="look-only" class="warning">{on_page(data.look_only)}</p>'
    if not items:
        # Only what this mcpd would know of: it says nothing of approvals or held
        # changes where nothing records them.
        checked = ["no server waits for a login or a fix to its configuration"]
        if data.approvals is not None:
            checked.append("no call waits for an approval")
        if data.held is not None:
            checked.append("no changed definition is held")
        said = "; ".join(checked)
        return head + f'<p class="muted">{said[0].upper()}{said[1:]}.</p>'
    return head + f'<ul class="waits">{"".join(items)}</ul>'


def _login_item(data: PageData, row: ServerRow) -> str:
    alias = on_page(row.alias)
    command = f"mcpd auth login {row.alias}"
    button = ""
    if data.csrf and data.logins_from_page:
        # The alias goes back as it is: the login names the very server.
        button = (
            f'<form method="post" action="/page/login">'
            f'<input type="hidden" name="server" value="{escape(row.alias)}">'
            f'<input type="hidden" name="csrf" value="{on_page(data.csrf)}">'
            f'<button type="submit" data-login="{alias}">Log in</button> <output></output></form>'
        )
    return (
        f'<li data-waits="login" data-server="{alias}"><span class="name">{alias}</span>'
        '<span class="pill person">needs a login</span>'
        f"<code>{on_page(command)}</code>{button}</li>"
    )


def _server(data: PageData, row: ServerRow) -> str:
    history = data.history.get(row.alias) or ServerHistory(row.alias, [], [])
    cls = charts.state_class(row.state)
    alias = on_page(row.alias)
    facts = [row.transport or "?"]
    # Unset: what the reader may not see (``others_row``), or a server without one.
    if isinstance(row.pid, int):
        facts.append(f"pid {row.pid}")
    if not isinstance(row.sandbox, UnsetType) and row.sandbox.level:
        facts.append(f"sandbox {row.sandbox.level}")
    facts.append(f"{row.tools} tools")
    used = profile_use(data.status.profiles)(row.alias)
    if used:
        facts.append("profiles: " + ", ".join(used))
    per_min, error_rate, hour_calls = _rates(history, data.now)
    latency = "-"
    if row.p50_ms is not None and row.p95_ms is not None:
        latency = f"{row.p50_ms:g} / {row.p95_ms:g} ms"
    return (
        f'<tr class="{cls}" data-server="{alias}" data-state="{on_page(row.state)}">'
        f'<th scope="row"><span class="name">{alias}</span>'
        f"<small>{on_page(_DOT.join(facts))}</small></th>"
        f'<td class="state" data-label="State">{_state(row, history, data.now)}</td>'
        f'<td data-label="Breaker">{_breaker(row)}</td>'
        f'<td class="n" data-label="Restarts">{row.restarts}</td>'
        f'<td class="n" data-label="Calls/min" title="average over the last {_RECENT} minutes">'
        f"{per_min}</td>"
        f'<td class="n" data-label="p50 / p95" title="over the latest calls">{latency}</td>'
        f'<td class="n" data-label="Errors" title="{hour_calls} calls in the last hour">'
        f"{error_rate}</td>"
        f'<td class="chart" data-label="Last hour">{charts.hour(history.minutes, data.now)}</td>'
        f'<td class="chart" data-label="Last 24 hours">'
        f"{charts.day(history.changes, data.now, clipped=history.clipped)}</td></tr>"
    )


def _state(row: ServerRow, history: ServerHistory, now: float) -> str:
    cls = charts.state_class(row.state)
    words = charts.WORDS.get(row.state, row.state)
    out = f'<span class="pill {cls}">{on_page(words)}</span>'
    since = _parse(row.since)
    if since is not None:
        lead = "up since" if cls == "up" else "since"
        out += f"<small>{lead} {_when(since, now)}</small>"
    if row.last_error and cls != "up":
        out += f'<small class="why">{on_page(row.last_error)}</small>'
        stderr = [] if isinstance(row.stderr, UnsetType) else row.stderr
        said = next((line.strip() for line in reversed(stderr) if line.strip()), "")
        if said:
            out += f'<small class="why">stderr: {on_page(said[:300])}</small>'
    elif row.last_error:
        out += f'<small class="why">last failure: {on_page(row.last_error)}</small>'
    if cls == "up":
        out += _last_outage(history, now)
    retry = _parse(row.retry_at)
    if retry is not None and cls != "up":
        out += f"<small>next try {charts.clock(retry)}</small>"
    for warning in row.warnings:
        out += f'<small class="warning">{on_page(warning)}</small>'
    return out


def _last_outage(history: ServerHistory, now: float) -> str:
    """For a server that is up: when it was last down in the day, how long, and why."""
    changes = history.changes
    for i in range(len(changes) - 1, -1, -1):
        change = changes[i]
        if charts.state_class(change.state) not in ("down", "person") or now - change.at > DAY:
            continue
        ended = changes[i + 1].at if i + 1 < len(changes) else now
        why = f": {on_page(change.reason)}" if change.reason else ""
        return (
            f'<small class="why">last down {charts.clock(change.at)} for '
            f"{_duration(ended - change.at)}{why}</small>"
        )
    return ""


def _breaker(row: ServerRow) -> str:
    b = row.breaker
    words = {"closed": "closed", "open": "open", "half_open": "half-open"}.get(b.state, b.state)
    out = on_page(words)
    if b.consecutive_failures:
        out += f"<small>{b.consecutive_failures} failing in a row</small>"
    if b.opened:
        out += f"<small>opened {b.opened}\u00d7</small>"
    return out


def _agents(profiles: list[ProfileStatus]) -> str:
    rows = "".join(
        f'<tr data-profile="{on_page(p.name)}"><th scope="row">{on_page(p.name)}</th>'
        f'<td class="n">{p.agents}</td><td class="n">{p.tools}</td>'
        f"<td>{on_page(p.mode)}</td><td>{on_page(', '.join(p.servers) or '-')}</td></tr>"
        for p in profiles
    )
    return (
        "<h2>Agents by profile</h2><table><thead><tr><th>Profile</th>"
        '<th class="n">Connected</th><th class="n">Tools</th><th>Lists</th><th>Servers</th>'
        f"</tr></thead><tbody>{rows}</tbody></table>"
    )


def _footer(data: PageData) -> str:
    d = data.status.daemon
    parts = [f"mcpd {on_page(d.version)}", f"up {_duration(d.uptime_s)}"]
    if not isinstance(d.pid, UnsetType):
        parts.append(f"pid {d.pid}")
    parts.append(f"{d.connections} agent connection{'s' if d.connections != 1 else ''}")
    parts.append(f"{d.tools} tools")
    parts.append(f"as of {datetime.fromtimestamp(data.now).strftime('%H:%M:%S')}")
    return _DOT.join(parts)


def _rates(history: ServerHistory, now: float) -> tuple[str, str, int]:
    """Calls per minute lately, the error rate of the last hour, and its calls."""
    recent_from = int(now // 60) * 60 - (_RECENT - 1) * 60
    recent = sum(m.calls for m in history.minutes if m.at >= recent_from)
    calls = sum(m.calls for m in history.minutes)
    errors = sum(m.errors for m in history.minutes)
    rate = "-" if not calls else f"{100 * errors / calls:.1f} %"
    return f"{recent / _RECENT:g}", rate, calls


def _parse(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None


def _when(at: float, now: float) -> str:
    return f"{charts.clock(at)} ({_duration(max(0.0, now - at))} ago)"


def _duration(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def login_target(alias: str) -> str:
    """Where a login started from the page comes back to (a path of this endpoint)."""
    return f"/page/oauth/{quote(alias, safe='')}"
