"""The page's charts: a server's day in ten-minute slots coloured by the worst state in
each (a short outage stays visible, a flapping server stays small), its hour of calls
per minute, and the last outage of a server that is up again."""

from __future__ import annotations

import re

from mcpd.agents.page.charts import SLOTS, clock, day, hour
from mcpd.agents.page.model import PageData
from mcpd.agents.page.render import regions
from mcpd.local.state.statefile import SavedChange, SavedMinute
from mcpd.servers.status.history import ServerHistory
from tests.support.parts.status_rows import daemon, document, server_row

NOW = 1_800_000_000.0


def rects(svg: str) -> list[tuple[str, float, float]]:
    """(class, x, width) of each coloured slot run."""
    found = re.findall(r'<rect class="(\w+)" x="([\d.]+)" y="2" width="([\d.]+)"', svg)
    return [(c, float(x), float(w)) for c, x, w in found]


def test_a_short_outage_is_a_slot_of_its_own() -> None:
    changes = [
        SavedChange(NOW - 90_000, "ready"),
        SavedChange(NOW - 5 * 3600, "crash_loop", "exited with status 1 <stderr>"),
        SavedChange(NOW - 5 * 3600 + 30, "ready"),
    ]
    svg = day(changes, NOW)
    drawn = rects(svg)
    assert [c for c, _, _ in drawn] == ["up", "down", "up"]
    assert drawn[1][2] == 2  # one slot wide, though it lasted half a minute
    assert sum(w for _, _, w in drawn) == 2 * SLOTS  # the whole day is known
    assert "exited with status 1 &lt;stderr&gt;" in svg  # the reason, escaped


def test_a_flapping_server_costs_no_more_than_the_slots() -> None:
    changes = [
        SavedChange(NOW - 86_000 + 300 * i, "open" if i % 2 else "ready") for i in range(256)
    ]
    drawn = rects(day(changes, NOW, clipped=True))
    assert len(drawn) <= SLOTS
    assert {c for c, _, _ in drawn} == {"up", "down"}


def test_a_day_before_mcpd_knew_the_server_is_left_blank() -> None:
    changes = [SavedChange(NOW - 600, "starting"), SavedChange(NOW - 598, "ready")]
    drawn = rects(day(changes, NOW))
    assert drawn[0][1] >= 2 * (SLOTS - 2)  # only the last slot or two
    assert drawn[-1][0] == "up"  # a start of seconds does not colour its slot


def test_the_hour_draws_latency_and_marks_errors() -> None:
    this = int(NOW // 60) * 60
    minutes = [
        SavedMinute(this - 120, 10, 0, 5.0, 40.0),
        SavedMinute(this - 60, 10, 5, 8.0, 80.0),
        SavedMinute(this - 7200, 99, 99, 1.0, 1.0),  # older than the hour: not drawn
    ]
    svg = hour(minutes, NOW)
    assert "last hour: 20 calls, 5 errors" in svg
    assert re.search(r'<path class="p95" d="M\d+ [\d.]+h2L', svg)  # two minutes, joined
    assert '<path class="err"' in svg
    quiet = hour([], NOW)
    assert "last hour: 0 calls, 0 errors" in quiet and "<path" not in quiet


def test_a_server_that_is_up_says_when_it_was_last_down_and_why() -> None:
    changes = [
        SavedChange(NOW - 90_000, "ready"),
        SavedChange(NOW - 7200, "crash_loop", "exited with status 2"),
        SavedChange(NOW - 7080, "ready"),
    ]
    status = document(daemon(summary="1 server: 1 ready"), [server_row("s", state="ready")])
    history = {"s": ServerHistory("s", changes, [])}
    row = regions(PageData(status, history, NOW))["rows"]
    assert f"last down {clock(NOW - 7200)} for 2 min: exited with status 2" in row
    calm = {"s": ServerHistory("s", changes[:1], [])}
    assert "last down" not in regions(PageData(status, calm, NOW))["rows"]
