"""Who gives up what a store every agent fills holds (``Holdings``): a user past its
share its own agent holding the most; past all's, the user holding the most, the
newcomer counted with its own; mcpd's own user and root with their reserve."""

from __future__ import annotations

from mcpd.agents.entry.shares import ByteShares, Holdings, shares_within

SHARES = ByteShares(most=10, per_uid=4, reserve=2)


def _held(*holds: tuple[int, str, int]) -> Holdings[str]:
    held: Holdings[str] = Holdings()
    for uid, agent, amount in holds:
        held.take(uid, agent, amount)
    return held


def test_a_user_past_its_share_gives_up_its_own_agent_holding_the_most() -> None:
    held = _held((1, "a", 1), (1, "b", 3), (2, "c", 1))
    assert held.to_give_up(SHARES, 1, False, 1) == "b"
    assert held.to_give_up(SHARES, 2, False, 1) is None


def test_past_alls_the_user_holding_the_most_gives_up_not_the_newcomer() -> None:
    held = _held((1, "a", 4), (2, "b", 4), (3, "c", 2))
    assert held.to_give_up(SHARES, 3, False, 1) == "a"
    # Counted with its own, the newcomer's user holds as much as the most: its own.
    held = _held((1, "a", 4), (2, "b", 3), (3, "c", 1), (3, "d", 2))
    assert held.to_give_up(SHARES, 3, False, 1) == "d"
    # One holding nothing makes room among the others.
    held = _held((1, "a", 4), (2, "b", 4), (3, "c", 2))
    assert held.to_give_up(SHARES, 4, False, 1) in {"a", "b"}


def test_mcpds_own_user_has_no_share_but_a_reserve_past_alls() -> None:
    held = _held((1, "a", 4), (2, "b", 4), (3, "c", 2))
    assert held.to_give_up(SHARES, 0, True, 2) is None
    held.take(0, "root", 2)
    assert held.to_give_up(SHARES, 0, True, 1) == "a"


def test_giving_back_forgets_an_agent_and_a_user_holding_nothing() -> None:
    held = _held((1, "a", 2), (1, "b", 1))
    held.give("a", 2)
    assert held.of(1) == 1 and held.user_of("a", 9) == 9 and held.user_of("b", 9) == 1
    held.give("b", 1)
    assert held.total == 0 and held.of(1) == 0
    assert held.to_give_up(SHARES, 1, False, 5) is None  # nothing held makes room


def test_a_reserve_kept_within_a_bound_leaves_the_others_the_rest() -> None:
    assert shares_within(ByteShares(most=100, per_uid=30, reserve=20)) == ByteShares(80, 30, 20)
    assert shares_within(ByteShares(most=16, per_uid=16, reserve=16)) == ByteShares(8, 8, 8)
