"""What the line connections' lines not yet ended may hold: shared out as the places
are, always room for a full line, and given back as a connection ends."""

from __future__ import annotations

import functools

from mcpd.agents.entry.shares import ByteShares
from mcpd.agents.entry.unfinished import (
    UNWEIGHED,
    LineHold,
    LineOwner,
    UnfinishedLines,
    unfinished_limits,
)
from mcpd.config.tables.model import DaemonConfig

MiB = 1 << 20


def test_the_bounds_follow_the_places_and_always_leave_room_for_a_full_line() -> None:
    """By default: all 64 MiB, one user a quarter of it, mcpd's own user and root a
    full line more; with longer lines, four of them, and one."""
    assert unfinished_limits(DaemonConfig()) == ByteShares(64 * MiB, 16 * MiB, 16 * MiB)
    long_lines = DaemonConfig(max_line_bytes=64 * MiB)
    assert unfinished_limits(long_lines) == ByteShares(256 * MiB, 64 * MiB, 64 * MiB)
    few = DaemonConfig(max_connections=16, max_connections_per_uid=8)
    assert unfinished_limits(few) == ByteShares(64 * MiB, 32 * MiB, 64 * MiB)


def test_one_user_holds_its_share_and_no_more_until_a_connection_lets_go() -> None:
    """Lines begun at once: none is older, none is let go for another."""
    lines = UnfinishedLines(DaemonConfig)
    other = LineOwner(65534, owner=False)
    first, second = LineHold(lines, other), LineHold(lines, other)
    assert first.weigh(UNWEIGHED, 0.0) is None and lines.total == 0  # each connection's own
    assert first.weigh(UNWEIGHED + 16 * MiB, 0.0) is None and lines.of(65534) == 16 * MiB
    refusal = second.weigh(UNWEIGHED + 1, 0.0)
    assert refusal is not None
    assert f"uid 65534 holds {16 * MiB} bytes of lines not yet ended" in refusal
    assert f"the {16 * MiB} one user may hold" in refusal
    # Another user, and mcpd's own, are not held back by it.
    assert LineHold(lines, LineOwner(1000, owner=False)).weigh(UNWEIGHED + MiB, 0.0) is None
    assert LineHold(lines, LineOwner(0, owner=True)).weigh(UNWEIGHED + 16 * MiB, 0.0) is None
    first.release()
    assert lines.of(65534) == 0 and second.weigh(UNWEIGHED + 1, 0.0) is None
    assert lines.of(65534) == 1


def test_past_what_all_may_hold_only_mcpds_own_user_and_root_get_more() -> None:
    lines = UnfinishedLines(DaemonConfig)
    for uid in range(4):  # four users at their share fill what all may hold
        user = LineHold(lines, LineOwner(1000 + uid, owner=False))
        assert user.weigh(UNWEIGHED + 16 * MiB, 0.0) is None
    refusal = LineHold(lines, LineOwner(2000, owner=False)).weigh(UNWEIGHED + 1, 0.0)
    assert refusal is not None and f"the {64 * MiB} all may hold" in refusal
    owner = LineHold(lines, LineOwner(0, owner=True))
    assert owner.weigh(UNWEIGHED + 16 * MiB, 0.0) is None
    refusal = LineHold(lines, LineOwner(None, owner=True)).weigh(UNWEIGHED + 1, 0.0)
    assert refusal is not None and f"the {16 * MiB} kept for mcpd's own user and root" in refusal


def test_a_line_that_does_not_fit_lets_go_of_the_oldest_lines_begun_before_it() -> None:
    """Mcpd's own user (or root) holding all there is, renewed: a line begun later
    makes room by ending the oldest, just as many as it needs, each told why."""
    lines = UnfinishedLines(DaemonConfig)
    cut: list[int] = []
    hogs = []
    for n in range(5):  # 80 MiB all told, the reserve too
        hog = LineHold(lines, LineOwner(0, owner=True))
        hog.on_cut = functools.partial(cut.append, n)
        assert hog.weigh(UNWEIGHED + 16 * MiB, float(n)) is None
        hogs.append(hog)
    assert lines.total == 80 * MiB
    honest = LineHold(lines, LineOwner(0, owner=True))
    assert honest.weigh(UNWEIGHED + 5 * MiB, 10.0) is None
    assert cut == [0] and lines.total == 69 * MiB and hogs[0].weighed == 0
    why = hogs[0].cut_for
    assert why is not None and "begun 10.0 s before another that needed room" in why
    assert hogs[0].weigh(UNWEIGHED + 17 * MiB, 0.0) == why  # once let go, it stays so
    # Lines begun after it are not let go for it: it is refused instead.
    assert hogs[1].weigh(UNWEIGHED + 32 * MiB, 1.0) is not None and cut == [0]
    assert honest.weigh(UNWEIGHED + 16 * MiB, 10.0) is None and cut == [0]


def test_a_user_past_its_share_lets_go_of_its_own_older_lines_alone() -> None:
    lines = UnfinishedLines(DaemonConfig)
    owners = LineHold(lines, LineOwner(0, owner=True))
    assert owners.weigh(UNWEIGHED + 8 * MiB, 0.0) is None
    old = LineHold(lines, LineOwner(65534, owner=False))
    assert old.weigh(UNWEIGHED + 16 * MiB, 1.0) is None
    new = LineHold(lines, LineOwner(65534, owner=False))
    assert new.weigh(UNWEIGHED + MiB, 2.0) is None
    assert old.cut_for is not None and owners.cut_for is None
    assert f"the {16 * MiB} bytes one user other than mcpd's own and root may hold" in (old.cut_for)
    assert lines.of(65534) == MiB and lines.total == 9 * MiB


def test_on_a_profiles_socket_mcpds_own_user_has_no_reserve() -> None:
    """As with connections: the reserve is kept on the daemon's own socket."""
    lines = UnfinishedLines(DaemonConfig)
    for _ in range(4):
        profiled = LineHold(lines, LineOwner(0, owner=True, own_socket=False))
        assert profiled.weigh(UNWEIGHED + 16 * MiB, 0.0) is None
    refusal = LineHold(lines, LineOwner(0, owner=True, own_socket=False)).weigh(UNWEIGHED + 1, 0.0)
    assert refusal is not None and "on mcpd's own socket, not a profile's" in refusal
    assert LineHold(lines, LineOwner(0, owner=True)).weigh(UNWEIGHED + 16 * MiB, 0.0) is None
