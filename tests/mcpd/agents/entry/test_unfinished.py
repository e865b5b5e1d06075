"""What the line connections' lines not yet ended may hold: shared out as the places
are, always room for a full line, and given back as a connection ends."""

from __future__ import annotations

from mcpd.agents.entry.unfinished import (
    UNWEIGHED,
    LineHold,
    LineOwner,
    UnfinishedLimits,
    UnfinishedLines,
    unfinished_limits,
)
from mcpd.config.tables.model import DaemonConfig

MiB = 1 << 20


def test_the_bounds_follow_the_places_and_always_leave_room_for_a_full_line() -> None:
    """By default: all 64 MiB, one user a quarter of it, mcpd's own user and root a
    full line more; with longer lines, four of them, and one."""
    assert unfinished_limits(DaemonConfig()) == UnfinishedLimits(64 * MiB, 16 * MiB, 16 * MiB)
    long_lines = DaemonConfig(max_line_bytes=64 * MiB)
    assert unfinished_limits(long_lines) == UnfinishedLimits(256 * MiB, 64 * MiB, 64 * MiB)
    few = DaemonConfig(max_connections=16, max_connections_per_uid=8)
    assert unfinished_limits(few) == UnfinishedLimits(64 * MiB, 32 * MiB, 64 * MiB)


def test_one_user_holds_its_share_and_no_more_until_a_connection_lets_go() -> None:
    lines = UnfinishedLines(DaemonConfig)
    other = LineOwner(65534, owner=False)
    first, second = LineHold(lines, other), LineHold(lines, other)
    assert first.weigh(UNWEIGHED) is None and lines.total == 0  # each connection's own
    assert first.weigh(UNWEIGHED + 16 * MiB) is None and lines.of(65534) == 16 * MiB
    refusal = second.weigh(UNWEIGHED + 1)
    assert refusal is not None
    assert f"uid 65534 holds {16 * MiB} bytes of lines not yet ended" in refusal
    assert f"the {16 * MiB} one user may hold" in refusal
    # Another user, and mcpd's own, are not held back by it.
    assert LineHold(lines, LineOwner(1000, owner=False)).weigh(UNWEIGHED + MiB) is None
    assert LineHold(lines, LineOwner(0, owner=True)).weigh(UNWEIGHED + 16 * MiB) is None
    first.release()
    assert lines.of(65534) == 0 and second.weigh(UNWEIGHED + 1) is None
    assert lines.of(65534) == 1


def test_past_what_all_may_hold_only_mcpds_own_user_and_root_get_more() -> None:
    lines = UnfinishedLines(DaemonConfig)
    for uid in range(4):  # four users at their share fill what all may hold
        assert (
            LineHold(lines, LineOwner(1000 + uid, owner=False)).weigh(UNWEIGHED + 16 * MiB) is None
        )
    refusal = LineHold(lines, LineOwner(2000, owner=False)).weigh(UNWEIGHED + 1)
    assert refusal is not None and f"the {64 * MiB} all may hold" in refusal
    owner = LineHold(lines, LineOwner(0, owner=True))
    assert owner.weigh(UNWEIGHED + 16 * MiB) is None
    refusal = LineHold(lines, LineOwner(None, owner=True)).weigh(UNWEIGHED + 1)
    assert refusal is not None and f"the {16 * MiB} kept for mcpd's own user and root" in refusal
