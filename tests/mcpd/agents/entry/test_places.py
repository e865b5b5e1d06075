"""How many connections the agent sockets let in (``Places``, ``PlacesHeld``, ``Seat``): all
together, one user's share, the reserve kept for mcpd's own user and root, and the
refusals' words and their ration of warnings."""

from __future__ import annotations

import logging
import os

import pytest

from mcpd.agents.entry.peers import Peer
from mcpd.agents.entry.places import (
    OWNER_RESERVE,
    PlaceLimits,
    Places,
    PlacesHeld,
    Seat,
    socket_limits,
    uid_quota,
)
from mcpd.config.tables.model import DaemonConfig

LIMITS = PlaceLimits(most=4, per_uid=2, per_uid_set_by="daemon.max_connections_per_uid = 2")
OTHER = 4242 if os.getuid() != 4242 else 4243


def fill(places: Places, *uids: int | None) -> None:
    for uid in uids:
        places.held.take(uid)


def test_a_users_share_is_a_quarter_unless_set() -> None:
    assert uid_quota(DaemonConfig(max_connections=100)) == 25
    assert uid_quota(DaemonConfig(max_connections=3)) == 1
    assert uid_quota(DaemonConfig(max_connections=100, max_connections_per_uid=7)) == 7
    assert socket_limits(DaemonConfig(max_connections=8)) == PlaceLimits(
        8, 2, "daemon.max_connections_per_uid = 2"
    )


def test_held_counts_each_user_and_forgets_one_with_none_left() -> None:
    held = PlacesHeld()
    held.take(5)
    held.take(5)
    held.take(None)
    assert (held.total, held.of(5), held.of(None), held.of(6)) == (3, 2, 1, 0)
    held.give(5)
    held.give(5)
    held.give(None)
    assert (held.total, held.of(5), held.of(None)) == (0, 0, 0)


def test_a_seat_is_held_until_its_block_ends_also_when_it_fails() -> None:
    held = PlacesHeld()
    peer = Peer(pid=1, uid=77, gid=77)
    with pytest.raises(RuntimeError), Seat(held, peer, None, 0.0):
        assert held.of(77) == 1
        raise RuntimeError
    assert held.total == 0
    with Seat(held, None, "work", 5.0) as seat:
        assert (seat.profile, seat.deadline, held.of(None)) == ("work", 5.0, 1)
    assert held.total == 0


def test_a_user_is_let_in_up_to_their_share_and_told_what_sets_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    places = Places()
    assert places.refusal_of(LIMITS, 7, False, "pid 9, uid 7") is None
    fill(places, 7, 7)
    assert places.refusal_of(LIMITS, 7, False, "pid 9, uid 7") == (
        "uid 7 has 2 connections to mcpd open, the most one user may have "
        "(daemon.max_connections_per_uid = 2)"
    )
    # Another user still gets in.
    assert places.refusal_of(LIMITS, 8, False, "pid 10, uid 8") is None
    assert caplog.messages == [
        "refused one more of the agent connections, to pid 9, uid 7: uid 7 has 2 open, "
        "the most one user may have (daemon.max_connections_per_uid = 2)"
    ]


def test_a_peer_mcpd_cannot_name_shares_one_users_share() -> None:
    places = Places()
    fill(places, None, None)
    assert places.refusal_of(LIMITS, None, False, "an unknown peer") == (
        "the user mcpd cannot name has 2 connections to mcpd open, the most one user may "
        "have (daemon.max_connections_per_uid = 2)"
    )


def test_past_the_most_everyone_is_refused_but_the_owner_who_has_a_reserve() -> None:
    places = Places()
    fill(places, 1, 2, 3, 4)
    assert places.refusal_of(LIMITS, 5, False, "pid 5, uid 5") == ("too many connections (limit 4)")
    for _ in range(OWNER_RESERVE):
        assert places.refusal_of(LIMITS, 0, True, "pid 1, uid 0") is None
        fill(places, 0)
    assert places.refusal_of(LIMITS, 0, True, "pid 1, uid 0") == (
        f"too many connections (limit 4, and the {OWNER_RESERVE} kept for mcpd's own user "
        "and root are taken too)"
    )


def test_the_owner_has_no_share_of_their_own() -> None:
    places = Places()
    fill(places, 0, 0, 0)
    assert places.refusal_of(LIMITS, 0, True, "pid 1, uid 0") is None


def test_refusals_when_full_are_warned_of_in_a_few_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    places = Places("endpoint connections")
    fill(places, 1, 2, 3, 4)
    with caplog.at_level(logging.WARNING, "mcpd.agents"):
        for pid in range(10):
            places.refusal_of(LIMITS, 5, False, f"pid {pid}, uid 5")
    assert caplog.messages == [
        "too many endpoint connections (limit 4): refused 1, the latest from pid 0, uid 5"
    ]


def test_refusal_names_the_peer_and_takes_an_unknown_one_for_the_owner() -> None:
    places = Places()
    d = DaemonConfig(max_connections=1)
    fill(places, OTHER)
    stranger = Peer(pid=3, uid=OTHER, gid=OTHER)
    assert places.refusal(d, stranger) == (
        f"uid {OTHER} has 1 connections to mcpd open, the most one user may have "
        "(daemon.max_connections_per_uid = 1)"
    )
    assert places.refusal(d, None) is None
    # A server's process is never the owner, whatever its uid.
    of_a_server = Peer(pid=4, uid=os.getuid(), gid=0, server="notes")
    fill(places, os.getuid())
    assert places.refusal(d, of_a_server) is not None
    assert places.refusal(d, Peer(pid=5, uid=os.getuid(), gid=0)) is None
