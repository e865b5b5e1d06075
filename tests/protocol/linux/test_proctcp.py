"""Who holds the other end of a loopback connection, from the text of Linux's TCP
tables: addresses in the machine's byte order, both tables, IPv4 mapped into IPv6, and
what is not a held socket's line (the heading, a listener, one no process holds, a
malformed line) never taken for one."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_address

import pytest

from protocol.linux.proctcp import (
    Address,
    ByteOrder,
    HeldSocket,
    listening_on,
    parse_proc_address,
    socket_holder,
)

HEAD4 = (
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
    "timeout inode\n"
)
HEAD6 = (
    "  sl  local_address                         remote_address                        st "
    "tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
)
TAIL = " 1 0000000000000000 20 4 30 10 -1\n"


def owner_uid(
    lines: list[str], local: Address, remote: Address, byteorder: ByteOrder
) -> int | None:
    held = socket_holder(lines, local, remote, byteorder)
    return None if held is None else held.uid


def row(n: int, local: str, remote: str, uid: int, inode: int, state: str = "01") -> str:
    return (
        f"{n:4}: {local} {remote} {state} 00000000:00000000 00:00000000 00000000 "
        f"{uid:5} {0:8} {inode}{TAIL}"
    )


# mcpd listens on 127.0.0.1:8765 (0x223D); a browser of uid 1000 connects from 41000
# (0xA028), a program of uid 1001 from 41001 (0xA029).
TCP = (
    HEAD4
    + row(0, "0100007F:223D", "00000000:0000", 0, 5001, "0A")  # mcpd's listener
    + row(1, "0100007F:A029", "0100007F:223D", 1001, 5002)
    + row(2, "0100007F:223D", "0100007F:A028", 0, 5003)  # mcpd's end of the browser's
    + row(3, "0100007F:A028", "0100007F:223D", 1000, 5004)
)
# mcpd on [::1]:8765; a client of uid 1000 from [::1]:41000, and one of uid 1002
# whose IPv6 socket reached 127.0.0.1:8765 from 41002 (0xA02A).
HEX6 = "0" * 24 + "01000000"  # ::1
MAPPED = "0" * 16 + "FFFF0000" + "0100007F"  # ::ffff:127.0.0.1
TCP6 = (
    HEAD6
    + row(0, f"{HEX6}:223D", "0" * 32 + ":0000", 0, 6001, "0A")
    + row(1, f"{HEX6}:A028", f"{HEX6}:223D", 1000, 6002)
    + row(2, f"{MAPPED}:A02A", f"{MAPPED}:223D", 1002, 6003)
)

LOOP4 = IPv4Address("127.0.0.1")
LOOP6 = IPv6Address("::1")


def at(ip: str, port: int) -> Address:
    return ip_address(ip), port


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("0100007F:223D", (LOOP4, 8765)),
        ("0101A8C0:0050", (IPv4Address("192.168.1.1"), 80)),
        ("00000000000000000000000001000000:223D", (LOOP6, 8765)),
        ("0000000000000000FFFF00000100007F:A02A", (LOOP4, 41002)),  # mapped: as IPv4
        ("B80D0120000000000000000001000000:0001", (IPv6Address("2001:db8::1"), 1)),
    ],
)
def test_addresses_are_read_in_a_little_endian_machines_order(text: str, address: Address) -> None:
    assert parse_proc_address(text, "little") == address


def test_a_big_endian_machine_writes_its_words_as_they_are() -> None:
    assert parse_proc_address("7F000001:223D", "big") == (LOOP4, 8765)
    assert parse_proc_address("0" * 24 + "00000001:0016", "big") == (LOOP6, 22)
    assert parse_proc_address("0" * 16 + "0000FFFF7F000001:0016", "big") == (LOOP4, 22)


@pytest.mark.parametrize("text", ["", "0100007F", "0100007F:22", "0100007:223D", "zz00007F:223D"])
def test_what_is_not_an_address_is_an_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_proc_address(text, "little")


def test_the_owner_is_the_socket_from_the_peer_to_mcpd() -> None:
    lines = TCP.splitlines()
    assert owner_uid(lines, at("127.0.0.1", 41000), at("127.0.0.1", 8765), "little") == 1000
    assert owner_uid(lines, at("127.0.0.1", 41001), at("127.0.0.1", 8765), "little") == 1001
    # mcpd's own end of the same connection (local and remote the other way) is not it.
    assert owner_uid(lines, at("127.0.0.1", 8765), at("127.0.0.1", 41000), "little") == 0
    assert owner_uid(lines, at("127.0.0.1", 41000), at("127.0.0.1", 8766), "little") is None
    assert owner_uid(lines, at("127.0.0.2", 41000), at("127.0.0.1", 8765), "little") is None


def test_the_ipv6_table_and_ipv4_mapped_into_it() -> None:
    lines = TCP6.splitlines()
    assert owner_uid(lines, at("::1", 41000), at("::1", 8765), "little") == 1000
    # An IPv6 socket that reached an IPv4 listener is found by the addresses mcpd sees,
    # IPv4 or mapped.
    assert owner_uid(lines, at("127.0.0.1", 41002), at("127.0.0.1", 8765), "little") == 1002
    mapped = at("::ffff:127.0.0.1", 41002), at("::ffff:127.0.0.1", 8765)
    assert owner_uid(lines, *mapped, "little") == 1002
    # A mapped peer of an IPv4 socket, as a dual-stack listener sees it.
    assert owner_uid(TCP.splitlines(), at("::ffff:127.0.0.1", 41000),
                        at("::ffff:127.0.0.1", 8765), "little") == 1000  # fmt: skip
    assert owner_uid(lines, at("::1", 41002), at("::1", 8765), "little") is None


def test_a_socket_no_process_holds_is_not_taken_for_its_owner() -> None:
    # Closed by its process and waiting out its last packets: the kernel writes uid 0.
    closed = HEAD4 + row(0, "0100007F:A028", "0100007F:223D", 0, 0, "05")
    assert owner_uid(closed.splitlines(), at("127.0.0.1", 41000), at("127.0.0.1", 8765),
                        "little") is None  # fmt: skip


def test_malformed_lines_are_passed_over() -> None:
    text = (
        HEAD4
        + "   0: 0100007F:A028 0100007F:223D 01\n"  # cut short
        + row(1, "0100007F:A028", "nonsense:223D", 7, 1)
        + row(2, "0100007F:A028", "0100007F:223D", 1000, 5004).replace(" 1000 ", " x ")
        + "garbage line with enough fields to look like one a b c d e f\n"
        + row(3, "0100007F:A028", "0100007F:223D", 1000, 5004)
    )
    assert owner_uid(text.splitlines(), at("127.0.0.1", 41000), at("127.0.0.1", 8765),
                        "little") == 1000  # fmt: skip
    assert owner_uid([], at("127.0.0.1", 41000), at("127.0.0.1", 8765), "little") is None


def test_the_socket_is_named_with_its_inode_for_its_holders_to_be_found() -> None:
    found = socket_holder(TCP6.splitlines(), at("::1", 41000), at("::1", 8765), "little")
    assert found == HeldSocket(1000, 6002)


def test_the_listeners_on_a_port_are_found_with_their_user_at_any_address() -> None:
    """What names the user who took the endpoint's port while mcpd was down."""
    v4 = [
        HEAD4,
        row(0, "0100007F:223D", "00000000:0000", 1002, 501, state="0A"),
        row(1, "00000000:223D", "00000000:0000", 1003, 502, state="0A"),
        row(2, "0100007F:223D", "0100007F:A028", 1000, 503),  # a connection, not a listener
        row(3, "0100007F:223E", "00000000:0000", 1004, 504, state="0A"),  # another port
        row(4, "0100007F:223D", "00000000:0000", 0, 0, state="0A"),  # held by no process
    ]
    assert listening_on(v4, 0x223D, "little") == [
        (IPv4Address("127.0.0.1"), HeldSocket(1002, 501)),
        (IPv4Address("0.0.0.0"), HeldSocket(1003, 502)),
    ]
    v6 = [HEAD6, row(0, "0" * 32 + ":223D", "0" * 32 + ":0000", 1005, 601, state="0A")]
    assert listening_on(v6, 0x223D, "little") == [(IPv6Address("::"), HeldSocket(1005, 601))]
