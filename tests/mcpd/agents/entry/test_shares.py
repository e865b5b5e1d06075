"""How bytes held for the agents are shared out: a user's part as its places are of
all, the least share and the budget as floor and ceiling, and the owner's reserve."""

from __future__ import annotations

from mcpd.agents.entry.shares import ByteShares, byte_shares
from mcpd.config.tables.model import DaemonConfig


def test_a_users_share_is_its_part_of_the_places_between_the_least_and_the_budget() -> None:
    few = DaemonConfig(max_connections=16, max_connections_per_uid=8)
    assert byte_shares(few, 1600, 10) == ByteShares(1600, 800, 1600)
    assert byte_shares(few, 1600, 1000) == ByteShares(1600, 1000, 1600)
    alone = DaemonConfig(max_connections=4, max_connections_per_uid=400)
    assert byte_shares(alone, 1600, 10).per_uid == 1600


def test_the_owners_reserve_is_never_less_than_the_least_share() -> None:
    many = DaemonConfig(max_connections=1600, max_connections_per_uid=16)
    assert byte_shares(many, 1600, 10) == ByteShares(1600, 16, 16)
    assert byte_shares(many, 1600, 100) == ByteShares(1600, 100, 100)


def test_a_user_past_its_share_is_told_so_before_all_is_full() -> None:
    shares = ByteShares(most=100, per_uid=30, reserve=20)
    assert shares.passed(total=0, has=20, more=10) is None
    assert shares.passed(total=95, has=20, more=11) == "share"
    assert shares.passed(total=95, has=0, more=10) == "all"
    assert shares.passed(total=90, has=0, more=10) is None
