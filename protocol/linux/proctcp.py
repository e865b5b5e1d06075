"""Linux's tables of TCP sockets (``/proc/net/tcp``, ``/proc/net/tcp6``), read as text:
which local user holds the other end of a connection on this machine.

Each line is one socket: its local and remote address, its state, and among others the
uid of whoever made it and the inode of its file (0 when no process holds it any
more). An address is hex digits then ``:`` and the port in hex; the address is its
32-bit words each printed as a number, so in the machine's byte order, and an IPv4
address in the IPv6 table (a socket that speaks IPv4 through an IPv6 one) is written
mapped (``::ffff:a.b.c.d``). The socket at the other end of a connection that mcpd
accepted is the one whose local address is the peer mcpd sees and whose remote
address is mcpd's own: the line's uid is that socket's owner.

The text is taken as it comes, line by line; nothing here opens a file.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Literal

import msgspec

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
Address = tuple[IP, int]
ByteOrder = Literal["little", "big"]

_WORD = 4


class HeldSocket(msgspec.Struct, frozen=True):
    """A socket a process holds: the uid of whoever made it, and the inode of its file
    (what its holders' descriptors link to, ``socket:[INODE]``)."""

    uid: int
    inode: int


def plain(ip: IP) -> IP:
    """``ip``, an IPv4 address when it is one mapped into IPv6 (how the two tables and
    the two kinds of socket may write the same peer)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def parse_proc_address(text: str, byteorder: ByteOrder) -> Address:
    """One ``HEX:PORT`` column as an address (IPv4-mapped written as IPv4); raises
    ValueError for anything else."""
    hexed, sep, port = text.partition(":")
    if not sep or len(port) != 4 or len(hexed) not in (8, 32):
        raise ValueError(f"not an address of the TCP table: {text!r}")
    printed = bytes.fromhex(hexed)
    raw = b"".join(
        int.from_bytes(printed[i : i + _WORD], "big").to_bytes(_WORD, byteorder)
        for i in range(0, len(printed), _WORD)
    )
    ip: IP = ipaddress.IPv4Address(raw) if len(raw) == _WORD else ipaddress.IPv6Address(raw)
    return plain(ip), int(port, 16)


def socket_holder(
    lines: Iterable[str], local: Address, remote: Address, byteorder: ByteOrder
) -> HeldSocket | None:
    """The socket in ``lines`` (one table's text, its heading included) from ``local``
    to ``remote``, held by a process; None when there is none.

    A socket no process holds any more (closed, or waiting out its last packets) is
    not taken: the kernel writes such a socket's uid as 0, whoever made it.
    """
    want = ((plain(local[0]), local[1]), (plain(remote[0]), remote[1]))
    for line in lines:
        fields = line.split()
        if len(fields) < 10 or not fields[0].endswith(":"):
            continue  # the heading, or what is not a socket's line
        try:
            found = (
                parse_proc_address(fields[1], byteorder),
                parse_proc_address(fields[2], byteorder),
            )
            uid, inode = int(fields[7]), int(fields[9])
        except ValueError:
            continue
        if found == want:
            return HeldSocket(uid, inode) if inode != 0 else None
    return None


_LISTEN = "0A"  # the state column of a listening socket


def listening_on(
    lines: Iterable[str], port: int, byteorder: ByteOrder
) -> list[tuple[IP, HeldSocket]]:
    """The sockets in ``lines`` (one table's text) listening on ``port``, each with its
    address (``0.0.0.0`` or ``::`` for every one), held by a process."""
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) < 10 or not fields[0].endswith(":") or fields[3] != _LISTEN:
            continue
        try:
            (ip, at), uid, inode = (
                parse_proc_address(fields[1], byteorder),
                int(fields[7]),
                int(fields[9]),
            )
        except ValueError:
            continue
        if at == port and inode != 0:
            found.append((ip, HeldSocket(uid, inode)))
    return found
