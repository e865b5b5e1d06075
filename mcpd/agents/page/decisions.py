"""The page's parts for what ``sources`` give: calls waiting for an approval and held
definition changes (in "Waiting for you", each with its buttons), and the latest calls
(a section of their own, filtered by server and outcome with a plain form). Each part
is drawn only when its source exists.
"""

from __future__ import annotations

from html import escape
from typing import Final

from . import charts
from .model import PageData
from .sources import CallFilter, CallRecord
from .words import shown

OUTCOMES: Final = ("ok", "tool error", "refused", "outage", "timeout", "cancelled", "error")


def _button(path: str, fields: dict[str, str], label: str, csrf: str, cls: str = "") -> str:
    # The values go back as they are: a decision names the very item it was shown.
    hidden = "".join(
        f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">'
        for k, v in {**fields, "csrf": csrf}.items()
    )
    kind = f' class="{cls}"' if cls else ""
    return (
        f'<form method="post" action="{path}">{hidden}'
        f'<button type="submit"{kind}>{shown(label)}</button> <output></output></form>'
    )


def approval_items(data: PageData) -> list[str]:
    out = []
    for a in data.approvals or []:
        buttons = ""
        if data.csrf:
            buttons = _button(
                "/page/decide", {"id": a.id, "decision": "approve"}, "Approve", data.csrf
            ) + _button("/page/decide", {"id": a.id, "decision": "deny"}, "Deny", data.csrf, "no")
        out.append(
            f'<li data-waits="approval" data-id="{shown(a.id)}">'
            f'<span class="name">{shown(a.tool)}</span>'
            '<span class="pill person">asks for approval</span>'
            f"<small>{shown(a.agent)}, since {charts.clock(a.since)}; "
            f"server {shown(a.server)}</small><code>{shown(a.arguments)}</code>{buttons}</li>"
        )
    return out


def held_items(data: PageData) -> list[str]:
    out = []
    for h in data.held or []:
        button = ""
        if data.csrf:
            fields = {"server": h.server, "kind": h.kind, "name": h.name, "digest": h.digest}
            button = _button("/page/release", fields, "Approve", data.csrf)
        since = "" if h.since is None else f", since {charts.clock(h.since)}"
        out.append(
            f'<li data-waits="change" data-server="{shown(h.server)}">'
            f'<span class="name">{shown(h.server)} / {shown(h.name)}</span>'
            f'<span class="pill person">{shown(h.kind)} held</span>'
            f"<small>{shown(h.reason)}{since}</small>"
            f'<pre class="diff">{shown(h.diff)}</pre>{button}</li>'
        )
    return out


def calls_section(data: PageData) -> str:
    calls = data.calls or []
    f = data.call_filter
    servers = sorted({row.alias for row in data.status.servers})
    profile = data.status.daemon.profile
    keep = f'<input type="hidden" name="profile" value="{escape(profile)}">' if profile else ""
    form = (
        f'<form method="get" action="/" class="filter">{keep}'
        f"{_select('server', servers, f.server)}{_select('outcome', list(OUTCOMES), f.outcome)}"
        '<button type="submit">Show</button></form>'
    )
    rows = "".join(_call_row(c) for c in calls)
    if not rows:
        rows = '<tr><td colspan="6" class="muted">No calls.</td></tr>'
    return (
        f"<h2>Latest calls</h2>{form}<table><thead><tr><th>When</th><th>Server</th>"
        '<th>Tool</th><th>Agent</th><th>Outcome</th><th class="n">Took</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )


def _select(name: str, options: list[str], chosen: str | None) -> str:
    items = [f'<option value="">any {name}</option>'] + [
        f'<option value="{escape(o)}"{" selected" if o == chosen else ""}>{shown(o)}</option>'
        for o in options
    ]
    return f'<select name="{name}" aria-label="{name}">{"".join(items)}</select>'


def _call_row(c: CallRecord) -> str:
    took = "-" if c.duration_ms is None else f"{c.duration_ms:g} ms"
    cls = "up" if c.outcome == "ok" else "down"
    return (
        f"<tr><td>{charts.clock(c.at)}</td><td>{shown(c.server)}</td>"
        f"<td>{shown(c.tool)}</td><td>{shown(c.agent)}</td>"
        f'<td><span class="pill {cls}">{shown(c.outcome)}</span></td>'
        f'<td class="n">{took}</td></tr>'
    )


def call_filter(query: dict[str, list[str]]) -> CallFilter:
    """The latest calls' filter from the page's address (``?server=&outcome=``)."""
    server = (query.get("server") or [""])[0] or None
    outcome = (query.get("outcome") or [""])[0] or None
    return CallFilter(server, outcome if outcome in OUTCOMES else None)
