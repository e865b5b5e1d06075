"""The page's two charts drawn from what the state file holds: an empty day or hour, the
worst state of a slot, states mcpd does not know, and the edges of each window."""

from __future__ import annotations

import re

from mcpd.agents.page.charts import SLOTS, clock, day, hour, state_class
from mcpd.local.state.statefile import SavedChange, SavedMinute

NOW = 1_800_000_000.0
START = NOW - 86400  # the day's left edge, on a slot's boundary
THIS = int(NOW // 60) * 60  # the hour's last minute
SLOT = 600.0


def runs(svg: str) -> list[tuple[str, int, int, str]]:
    """(class, first slot, slots wide, title) of each coloured run of slots."""
    found = re.findall(
        r'<rect class="(\w+)" x="(\d+)" y="2" width="(\d+)" height="\d+"><title>([^<]*)</title>',
        svg,
    )
    return [(c, int(x) // 2, int(w) // 2, t) for c, x, w, t in found]


def test_a_day_with_no_states_is_an_empty_track() -> None:
    svg = day([], NOW)
    assert runs(svg) == []
    assert '<rect class="track"' in svg
    assert "<title>" not in svg


def test_each_slot_takes_the_worst_state_it_held_however_briefly() -> None:
    changes = [
        SavedChange(START - 60, "ready"),
        SavedChange(START + 100 * SLOT + 10, "degraded", "slow"),
        SavedChange(START + 100 * SLOT + 20, "needs_login", "token expired"),
        SavedChange(START + 100 * SLOT + 30, "ready"),
        SavedChange(START + 120 * SLOT + 10, "needs_login", "token expired"),
        SavedChange(START + 120 * SLOT + 20, "failed", "exited with status 1"),
        SavedChange(START + 120 * SLOT + 30, "ready"),
    ]
    drawn = runs(day(changes, NOW))
    assert [(c, first, wide) for c, first, wide, _ in drawn] == [
        ("up", 0, 100),
        ("person", 100, 1),
        ("up", 101, 19),
        ("down", 120, 1),
        ("up", 121, SLOTS - 121),
    ]
    person, down = drawn[1][3], drawn[3][3]
    assert person.startswith("needs a login ") and person.endswith(": token expired")
    assert down == (
        f"down {clock(START + 120 * SLOT)}\u2013{clock(START + 121 * SLOT)}: exited with status 1"
    )


def test_a_reason_kept_with_an_up_state_is_not_shown() -> None:
    ((cls, _, wide, title),) = runs(day([SavedChange(START, "ready", "back after 3 tries")], NOW))
    assert (cls, wide) == ("up", SLOTS)
    assert title == f"ready {clock(START)}\u2013{clock(NOW)}"


def test_a_state_this_mcpd_does_not_know_is_drawn_as_off_under_its_own_name() -> None:
    """As a state file written by a newer mcpd holds."""
    assert state_class("hibernating") == "off"
    ((cls, first, wide, title),) = runs(day([SavedChange(START - 1, "hibernating", "why")], NOW))
    assert (cls, first, wide) == ("off", 0, SLOTS)
    assert title.startswith("hibernating ") and title.endswith(": why")


def test_a_state_held_since_before_the_day_fills_it_and_one_dated_after_now_is_not_drawn() -> None:
    changes = [SavedChange(NOW - 3 * 86400, "ready"), SavedChange(NOW + 60, "failed", "later")]
    ((cls, first, wide, title),) = runs(day(changes, NOW))
    assert (cls, first, wide) == ("up", 0, SLOTS)
    assert "later" not in title


def test_a_clipped_day_says_its_earliest_changes_are_not_shown() -> None:
    changes = [SavedChange(START, "ready")]
    assert "earliest are not shown" in day(changes, NOW, clipped=True)
    assert "earliest are not shown" not in day(changes, NOW)


def test_a_minute_without_calls_breaks_the_latency_lines() -> None:
    minutes = [
        SavedMinute(THIS - 180, 3, 0, 5.0, 10.0),
        SavedMinute(THIS - 120, 0, 0),
        SavedMinute(THIS - 60, 2, 0, 5.0, 10.0),
    ]
    svg = hour(minutes, NOW)
    # Steps 56 and 58 of the hour; the slowest p95 is the top of the room.
    assert '<path class="p95" d="M112 1h2M116 1h2"/>' in svg
    assert '<path class="p50" d="M112 11.5h2M116 11.5h2"/>' in svg
    assert "last hour: 5 calls, 0 errors, slowest minute&#x27;s p95 10 ms" in svg
    assert 'class="err"' not in svg


def test_an_hour_of_failed_calls_only_has_error_marks_sized_by_their_share() -> None:
    minutes = [SavedMinute(THIS - 60, 4, 4), SavedMinute(THIS, 4, 2)]
    svg = hour(minutes, NOW)
    assert '<path class="p95"' not in svg and '<path class="p50"' not in svg
    assert '<path class="err" d="M116 28v-6.0h2V28zM118 28v-4.0h2V28z"/>' in svg
    assert "last hour: 8 calls, 6 errors<" in svg  # no slowest minute without latency


def test_the_hour_holds_the_current_minute_and_the_59_before_it_only() -> None:
    minutes = [
        SavedMinute(THIS - 3600, 100, 0, 1.0, 1.0),  # an hour ago: past the left edge
        SavedMinute(THIS - 3540, 1, 0, 1.0, 1.0),
        SavedMinute(THIS, 2, 0, 1.0, 1.0),
        SavedMinute(THIS + 60, 100, 0, 1.0, 1.0),  # a clock set back: not yet
    ]
    svg = hour(minutes, NOW)
    assert "last hour: 3 calls, 0 errors" in svg
    assert '<path class="p95" d="M0 1h2M118 1h2"/>' in svg
