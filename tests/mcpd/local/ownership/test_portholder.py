"""Which of the sockets listening on a port hold it for the address mcpd tried: one on
that very address before one on every address, of the address's own family, an IPv6
one on every address taking IPv4 too unless it cannot have."""

from __future__ import annotations

from ipaddress import ip_address

from mcpd.local.ownership.portholder import Listener, reached
from protocol.linux.proctcp import HeldSocket

ROOT = HeldSocket(0, 100)
ALICE = HeldSocket(1001, 101)
MALLORY = HeldSocket(1002, 102)


def on(at: str, held: HeldSocket, v6: bool | None = None) -> Listener:
    address = ip_address(at)
    return Listener(address, address.version == 6 if v6 is None else v6, held)


def test_an_ipv6_address_is_held_by_its_own_listener_not_by_an_ipv4_one_on_every_address() -> None:
    found = [on("0.0.0.0", ROOT), on("::1", MALLORY)]
    assert reached(ip_address("::1"), found) == [MALLORY]


def test_an_ipv4_listener_on_every_address_holds_no_ipv6_one() -> None:
    found = [on("0.0.0.0", MALLORY), on("::1", ALICE)]
    assert reached(ip_address("::1"), found) == [ALICE]


def test_the_very_address_beats_every_address() -> None:
    found = [on("0.0.0.0", ROOT), on("127.0.0.1", MALLORY)]
    assert reached(ip_address("127.0.0.1"), found) == [MALLORY]
    found = [on("::", ROOT), on("::1", MALLORY)]
    assert reached(ip_address("::1"), found) == [MALLORY]


def test_every_address_holds_one_nothing_listens_on_alone() -> None:
    assert reached(ip_address("127.0.0.1"), [on("0.0.0.0", MALLORY)]) == [MALLORY]
    assert reached(ip_address("::1"), [on("::", MALLORY)]) == [MALLORY]


def test_an_ipv6_socket_on_every_address_holds_ipv4_ones_when_alone_on_that_side() -> None:
    assert reached(ip_address("127.0.0.1"), [on("::", MALLORY)]) == [MALLORY]


def test_an_ipv6_socket_beside_another_user_s_ipv4_listener_was_bound_for_ipv6_alone() -> None:
    found = [on("0.0.0.0", ROOT), on("::", MALLORY)]
    assert reached(ip_address("127.0.0.1"), found) == [ROOT]


def test_an_ipv6_socket_on_a_mapped_address_holds_that_ipv4_address() -> None:
    found = [on("0.0.0.0", ROOT), on("127.0.0.1", MALLORY, v6=True)]
    assert reached(ip_address("127.0.0.1"), found) == [MALLORY]
    assert reached(ip_address("::1"), found) == []


def test_every_address_tried_is_held_by_each_listener_of_its_family() -> None:
    found = [on("127.0.0.1", MALLORY), on("::1", ALICE)]
    assert reached(ip_address("0.0.0.0"), found) == [MALLORY]
    assert reached(ip_address("::"), found) == [ALICE]


def test_each_of_several_listeners_on_one_address_is_named() -> None:
    found = [on("127.0.0.1", ALICE), on("127.0.0.1", MALLORY), on("0.0.0.0", ROOT)]
    assert reached(ip_address("127.0.0.1"), found) == [ALICE, MALLORY]


def test_nobody_holds_an_address_of_another_family() -> None:
    assert reached(ip_address("::1"), [on("127.0.0.1", MALLORY)]) == []
