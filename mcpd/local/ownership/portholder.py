"""Who listens on a TCP port that mcpd could not listen on.

The kernel's tables of TCP sockets (``/proc/net/tcp``, ``/proc/net/tcp6``) list every
listening socket of mcpd's network namespace with the uid that made it, whoever that
is; which process holds it shows only to a reader of that process's descriptors
(its own user, or root).

The socket a connection to an address reaches is one listening on that very address
where there is one, else one listening on every address of its family (``0.0.0.0``,
``::``); an IPv6 socket on every address takes IPv4 ones too, unless it was bound for
IPv6 alone. The tables do not say which were; such a socket beside an IPv4 listener
of another user on the port must have been, since otherwise the two could not have
been bound together. Where mcpd tried every address, each listener of that family
is one that some connection reaches. Several sockets may listen on one address
(``SO_REUSEPORT``, among one user's); each of them may be the one reached.
"""

from __future__ import annotations

import ipaddress
import sys
import time
from typing import Final

import msgspec

from protocol.linux.proctcp import IP, HeldSocket, listening_on, plain

from .tcp_holder import TABLES, holding

# How long the processes are looked through for the one holding the socket.
_LOOK: Final = 2.0


class PortHolder(msgspec.Struct, frozen=True):
    """The user who listens on the port, and those of its processes mcpd can see
    holding the socket (none where it cannot read them)."""

    uid: int
    pids: list[int]


class Listener(msgspec.Struct, frozen=True):
    """A socket listening on the port: its address (IPv4 when it is one mapped into
    IPv6), whether it is an IPv6 socket, and who holds it."""

    at: IP
    v6: bool
    held: HeldSocket


def listeners(port: int) -> list[Listener]:
    """Every socket the tables list listening on ``port`` (IPv6 ones where the table's
    name says so)."""
    found = []
    for path in TABLES:
        try:
            with open(path, encoding="ascii", errors="replace") as table:
                listed = listening_on(table, port, sys.byteorder)
        except OSError:
            continue
        found += [Listener(at, path.endswith("6"), held) for at, held in listed]
    return found


def reached(want: IP, found: list[Listener]) -> list[HeldSocket]:
    """The sockets among ``found`` that a connection to ``want`` on the port may reach
    (``want`` unspecified: a connection to any address of its family); none when no
    socket holds that address."""
    want = plain(want)
    v4 = isinstance(want, ipaddress.IPv4Address)
    # An IPv6 socket on ``::`` takes IPv4 too, unless another user's IPv4 socket is on
    # the port: bound for both, it would have kept that one from binding.
    v4_uids = {each.held.uid for each in found if _v4_side(each)}
    family = [
        each
        for each in found
        if _v4_side(each) == v4
        or (v4 and each.v6 and each.at.is_unspecified and not v4_uids - {each.held.uid})
    ]
    if want.is_unspecified:
        return [each.held for each in family]
    exact = [each.held for each in family if each.at == want]
    return exact or [each.held for each in family if each.at.is_unspecified]


def _v4_side(each: Listener) -> bool:
    """Whether ``each`` listens on IPv4 addresses alone (an IPv4 socket, or an IPv6
    one on a mapped address)."""
    return isinstance(each.at, ipaddress.IPv4Address)


def port_holders(ip: IP, port: int) -> list[HeldSocket]:
    """The sockets that hold ``port`` at ``ip`` for connections to it, by the tables;
    none when they name nobody (they cannot be read, or the listener is in another
    network namespace)."""
    return reached(ip, listeners(port))


def port_holder(held: HeldSocket) -> PortHolder:
    """The user of ``held``, and those of its processes mcpd can see holding it."""
    try:
        pids = holding(held, until=time.monotonic() + _LOOK)
    except (OSError, TimeoutError):
        pids = []
    return PortHolder(held.uid, pids)


def process_name(pid: int) -> str:
    """``pid``'s command name, as /proc says it ("" once it is gone)."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as comm:
            return comm.read().strip()
    except OSError:
        return ""
