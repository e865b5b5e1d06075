"""The page's parts for what ``sources`` give: calls waiting for an approval and held
definition changes (in "Waiting for you", each with its buttons), and the latest calls
(a section of their own, filtered by server and outcome with a plain form). Each part
is drawn only when its source exists.

Each part is of a bounded size, whatever a server lists or the agents call: what waits
is drawn for the first few (``sources.Waiting``) with a line for the rest, each held
change's diff is cut (``helddiff``), and a name longer than a person reads at a glance
is cut where it is shown, with the command that shows it whole.
"""

from __future__ import annotations

from html import escape
from typing import Final

from ...registry.findings.rules import Finding
from . import charts
from .model import PageData
from .sources import CallFilter, CallRow
from .words import cut_short, on_page

OUTCOMES: Final = ("ok", "tool error", "refused", "outage", "timeout", "cancelled", "error")
NAME_SHOWN: Final = 120  # characters of a server's name for an item, or an agent's
# Of a held item whose name is longer, the page has no Approve: its form would carry it.
NAME_SENT: Final = 1024
FINDINGS_SHOWN: Final = 5  # of a held change
EXCERPT_SHOWN: Final = 200  # characters of the text a rule found something in


def _button(path: str, fields: dict[str, str], label: str, csrf: str, cls: str = "") -> str:
    # The values go back as they are: a decision names the very item it was shown.
    hidden = "".join(
        f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">'
        for k, v in {**fields, "csrf": csrf}.items()
    )
    kind = f' class="{cls}"' if cls else ""
    return (
        f'<form method="post" action="{path}">{hidden}'
        f'<button type="submit"{kind}>{on_page(label)}</button> <output></output></form>'
    )


def approval_items(data: PageData) -> list[str]:
    waiting = data.approvals
    if waiting is None:
        return []
    out = []
    for a in waiting.first:
        buttons = ""
        whole = f"<code>mcpd approvals show {on_page(a.id)}</code>"
        if data.csrf:
            deny = _button(
                "/page/decide", {"id": a.id, "decision": "deny"}, "Deny", data.csrf, "no"
            )
            approve = _button(
                "/page/decide", {"id": a.id, "decision": "approve"}, "Approve", data.csrf
            )
            buttons = deny if a.keys_left_out else approve + deny
        if a.keys_left_out:
            buttons = (
                f"<small>{a.keys_left_out} keys of its arguments do not fit here: read them"
                f" with {whole}, and decide it there.</small>{buttons}"
            )
        elif a.shortened:
            buttons = (
                f"<small>Long values are shortened where they stand: {whole} shows them"
                f" whole.</small>{buttons}"
            )
        out.append(
            f'<li data-waits="approval" data-id="{on_page(a.id)}">'
            f'<span class="name">{on_page(cut_short(a.tool, NAME_SHOWN))}</span>'
            '<span class="pill person">asks for approval</span>'
            f"<small>{on_page(a.agent)}, since {charts.clock(a.since)}; "
            f"server {on_page(a.server)}</small><code>{on_page(a.arguments)}</code>{buttons}</li>"
        )
    if waiting.more:
        calls = "call waits" if waiting.more == 1 else "calls wait"
        out.append(
            f'<li data-waits="more"><small>{waiting.more} more {calls} for approval: '
            "<code>mcpd approvals</code> lists and decides them all.</small></li>"
        )
    return out


def held_items(data: PageData) -> list[str]:
    waiting = data.held
    if waiting is None:
        return []
    out = []
    for h in waiting.first:
        command = f"<code>mcpd approve {on_page(h.server)}</code>"
        button = ""
        if h.cut:
            # Approved only where all of what is approved is in sight.
            button = (
                f"<small>The diff is cut short here, so the page does not approve it: "
                f"{command} shows all of it.</small>"
            )
        elif data.csrf and len(h.name) <= NAME_SENT:
            fields = {"server": h.server, "kind": h.kind, "name": h.name, "digest": h.digest}
            button = _button("/page/release", fields, "Approve", data.csrf)
        elif data.csrf:
            button = f"<small>Its name is too long for the page: approve it with {command}.</small>"
        since = "" if h.since is None else f", since {charts.clock(h.since)}"
        # A diff that may be approved here is drawn whole in the page's flow, with no box
        # of its own to scroll or lines running out of sight: the way down to Approve
        # passes every line of it. A cut one is not approved here, and a box keeps it short.
        box = "diff cut" if h.cut else "diff"
        out.append(
            f'<li data-waits="change" data-server="{on_page(h.server)}">'
            f'<span class="name">{on_page(h.server)} / '
            f"{on_page(cut_short(h.name, NAME_SHOWN))}</span>"
            f'<span class="pill person">{on_page(h.kind)} held</span>'
            f"<small>{on_page(h.reason)}{since}</small>{_findings(h.findings)}"
            f'<pre class="{box}">{on_page(h.diff)}</pre>{button}</li>'
        )
    if waiting.more:
        changes = "held change" if waiting.more == 1 else "held changes"
        out.append(
            f'<li data-waits="more"><small>{waiting.more} more {changes}: '
            "<code>mcpd tools --pending</code> lists them all, and "
            "<code>mcpd approve SERVER</code> shows and approves those of a server.</small></li>"
        )
    return out


def _findings(found: tuple[Finding, ...]) -> str:
    """What the finding rules flagged in a held change, as ``mcpd tools --findings``
    lists it: the first few, and how many more."""
    if not found:
        return ""
    lines = [
        f"Flagged: {on_page(f.rule)} in {on_page(cut_short(f.where, NAME_SHOWN))}: "
        f"\u201c{on_page(cut_short(f.excerpt, EXCERPT_SHOWN))}\u201d"
        for f in found[:FINDINGS_SHOWN]
    ]
    more = len(found) - FINDINGS_SHOWN
    if more > 0:
        lines.append(f"{more} more flagged: <code>mcpd tools --findings</code> lists them all.")
    return "".join(f'<small class="found">{line}</small>' for line in lines)


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
        f'<option value="{escape(o)}"{" selected" if o == chosen else ""}>{on_page(o)}</option>'
        for o in options
    ]
    return f'<select name="{name}" aria-label="{name}">{"".join(items)}</select>'


def _call_row(c: CallRow) -> str:
    took = "-" if c.duration_ms is None else f"{c.duration_ms:g} ms"
    cls = "up" if c.outcome == "ok" else "down"
    return (
        f"<tr><td>{charts.clock(c.at)}</td><td>{on_page(c.server)}</td>"
        f"<td>{on_page(cut_short(c.tool, NAME_SHOWN))}</td>"
        f"<td>{on_page(cut_short(c.agent, NAME_SHOWN))}</td>"
        f'<td><span class="pill {cls}">{on_page(c.outcome)}</span></td>'
        f'<td class="n">{took}</td></tr>'
    )


def call_filter(query: dict[str, list[str]]) -> CallFilter:
    """The latest calls' filter from the page's address (``?server=&outcome=``)."""
    server = (query.get("server") or [""])[0] or None
    outcome = (query.get("outcome") or [""])[0] or None
    return CallFilter(server, outcome if outcome in OUTCOMES else None)
