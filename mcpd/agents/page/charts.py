"""The page's two small charts, as inline SVG: a server's last day, and its last hour.

The day is cut into slots of ten minutes, each drawn in the colour of the worst state
the server was in during it, so a short outage stays visible and a flapping server
costs no more than a calm one. The hour is a minute per step: the median and 95th
percentile latency as lines, minutes with errors as red marks below.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from ...local.state.statefile import SavedChange, SavedMinute
from ...servers.shared import DAY, HOUR
from . import words

SLOTS: Final = 144  # of ten minutes
_SLOT_W: Final = 2
_DAY_W: Final = SLOTS * _SLOT_W
_DAY_H: Final = 16
_MINUTE_W: Final = 2
_HOUR_W: Final = 60 * _MINUTE_W
_HOUR_H: Final = 28
_LINE_H: Final = 22  # the latency lines' room; the error marks have the rest

# Each state's class on the page, and how bad it is (the worse one colours a slot).
CLASSES: Final = {
    "ready": "up",
    "degraded": "warn",
    "idle": "idle",
    "starting": "warn",
    "half_open": "warn",
    "open": "down",
    "failed": "down",
    "unreachable": "down",
    "crash_loop": "down",
    "needs_login": "person",
    "unresolved": "person",
    "stopped": "off",
}
_RANK: Final = {"off": 0, "idle": 1, "up": 2, "warn": 3, "person": 4, "down": 5}
# A start that ends in a few seconds is how a slot's uptime began, not a problem in it.
_STATE_RANK: Final = {"starting": 1}
WORDS: Final = {
    "ready": "ready",
    "degraded": "degraded",
    "idle": "idle",
    "starting": "starting",
    "half_open": "probing",
    "open": "failing",
    "failed": "down",
    "unreachable": "unreachable",
    "crash_loop": "crash loop",
    "needs_login": "needs a login",
    "unresolved": "cannot start",
    "stopped": "stopped",
}


def state_class(state: str) -> str:
    return CLASSES.get(state, "off")


def clock(at: float) -> str:
    return datetime.fromtimestamp(at).strftime("%H:%M")


def day(changes: list[SavedChange], now: float, *, clipped: bool = False) -> str:
    """The last day of a server's states, oldest on the left."""
    start = now - DAY
    width = DAY / SLOTS
    worst: list[SavedChange | None] = [None] * SLOTS
    for i, change in enumerate(changes):
        begins = max(change.at, start)
        ends = changes[i + 1].at if i + 1 < len(changes) else now
        if ends <= start or begins >= now:
            continue
        first = int((begins - start) // width)
        last = min(SLOTS - 1, int((max(ends, begins + 1) - start - 1e-6) // width))
        rank = _rank(change.state)
        for k in range(max(first, 0), last + 1):
            held = worst[k]
            if held is None or rank > _rank(held.state):
                worst[k] = change
    parts = [
        f'<svg class="day" viewBox="0 0 {_DAY_W} {_DAY_H}" preserveAspectRatio="none" '
        f'role="img" aria-label="states over the last 24 hours">',
        f'<rect class="track" x="0" y="0" width="{_DAY_W}" height="{_DAY_H}"/>',
    ]
    k = 0
    while k < SLOTS:
        held = worst[k]
        run = k + 1
        while run < SLOTS and _same(worst[run], held):
            run += 1
        if held is not None:
            parts.append(_slot_run(held, start + k * width, min(now, start + run * width), k, run))
        k = run
    if clipped:
        parts.append("<title>more state changes than are kept; the earliest are not shown</title>")
    parts.append("</svg>")
    return "".join(parts)


def _rank(state: str) -> int:
    return _STATE_RANK.get(state, _RANK[state_class(state)])


def _same(a: SavedChange | None, b: SavedChange | None) -> bool:
    if a is None or b is None:
        return a is b
    return state_class(a.state) == state_class(b.state)


def _slot_run(change: SavedChange, begins: float, ends: float, first: int, last: int) -> str:
    cls = state_class(change.state)
    what = WORDS.get(change.state, change.state)
    title = f"{what} {clock(begins)}\u2013{clock(ends)}"
    if change.reason and cls != "up":
        title += f": {change.reason}"
    x, w = first * _SLOT_W, (last - first) * _SLOT_W
    return (
        f'<rect class="{cls}" x="{x}" y="2" width="{w}" height="{_DAY_H - 4}">'
        f"<title>{words.on_page(title)}</title></rect>"
    )


def hour(minutes: list[SavedMinute], now: float) -> str:
    """The last hour of a server's calls: latency lines and error marks, per minute."""
    this_minute = int(now // 60) * 60
    first = this_minute - HOUR + 60
    shown = [m for m in minutes if first <= m.at <= this_minute]
    calls = sum(m.calls for m in shown)
    errors = sum(m.errors for m in shown)
    top = max((m.p95_ms or m.p50_ms or 0.0 for m in shown), default=0.0)
    label = f"last hour: {calls} calls, {errors} errors"
    if top:
        label += f", slowest minute's p95 {top:g} ms"
    parts = [
        f'<svg class="spark" viewBox="0 0 {_HOUR_W} {_HOUR_H}" preserveAspectRatio="none" '
        f'role="img" '
        f'aria-label="{words.on_page(label)}"><title>{words.on_page(label)}</title>',
        f'<rect class="track" x="0" y="0" width="{_HOUR_W}" height="{_HOUR_H}"/>',
    ]
    if top:
        for cls, pick in (("p95", 1), ("p50", 0)):
            path = _line(shown, first, top, pick)
            if path:
                parts.append(f'<path class="{cls}" d="{path}"/>')
    marks = "".join(
        f"M{(m.at - first) // 60 * _MINUTE_W} {_HOUR_H}v-{_err_height(m)}h{_MINUTE_W}V{_HOUR_H}z"
        for m in shown
        if m.errors
    )
    if marks:
        parts.append(f'<path class="err" d="{marks}"/>')
    parts.append("</svg>")
    return "".join(parts)


def _line(shown: list[SavedMinute], first: int, top: float, pick: int) -> str:
    """A step line: each minute with calls is a level across its width, joined to the
    next one; a minute without calls breaks it (nothing was measured there)."""
    out: list[str] = []
    previous: int | None = None
    for m in shown:
        value = (m.p50_ms, m.p95_ms)[pick]
        if value is None:
            previous = None
            continue
        step = (m.at - first) // 60
        y = round(1 + (_LINE_H - 1) * (1 - value / top), 1)
        lead = "L" if previous == step - 1 else "M"
        out.append(f"{lead}{step * _MINUTE_W} {y:g}h{_MINUTE_W}")
        previous = step
    return "".join(out)


def _err_height(m: SavedMinute) -> float:
    share = m.errors / m.calls if m.calls else 1.0
    return round(2 + (_HOUR_H - _LINE_H - 2) * share, 1)
