"""Which local user holds the other end of a TCP connection mcpd accepted.

A loopback connection's other end is a socket of this machine, and Linux lists every
socket of mcpd's network namespace, with the uid that made it, in ``/proc/net/tcp``
and ``/proc/net/tcp6`` (``protocol.proctcp`` reads them). A connection from another
machine, or from another network namespace, has no such line: its owner is unknown,
and whoever asks refuses what takes one.
"""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from protocol.proctcp import Address, socket_owner

if TYPE_CHECKING:
    import trio

TABLES: Final = ("/proc/net/tcp", "/proc/net/tcp6")


class OwnerUnknown(Exception):
    """Who holds a connection's other end cannot be told; the message says why."""


def _address(sockaddr: object) -> Address:
    if not isinstance(sockaddr, tuple) or len(sockaddr) < 2:
        raise OwnerUnknown(f"the connection is not TCP over IP ({sockaddr!r})")
    host, port = sockaddr[0], sockaddr[1]
    try:
        return ipaddress.ip_address(str(host).partition("%")[0]), int(port)
    except ValueError:
        raise OwnerUnknown(f"the address {host!r} cannot be read") from None


def tcp_owner(sock: trio.socket.SocketType, tables: tuple[str, ...] = TABLES) -> int:
    """The uid of the process holding the other end of ``sock``; raises OwnerUnknown."""
    try:
        own, peer = _address(sock.getsockname()), _address(sock.getpeername())
    except OSError as exc:
        raise OwnerUnknown(f"the connection is gone ({exc.strerror})") from None
    unread = []
    for path in tables:
        try:
            # Read as it comes (the table may be long), from mcpd's own namespace.
            with open(path, encoding="ascii", errors="replace") as table:
                uid = socket_owner(table, peer, own, sys.byteorder)
        except OSError as exc:
            unread.append(f"{path}: {exc.strerror or exc}")
            continue
        if uid is not None:
            return uid
    if len(unread) == len(tables):
        raise OwnerUnknown(f"the sockets' tables cannot be read ({'; '.join(unread)})")
    why = (
        f"no process of this machine holds its other end ({' and '.join(tables)} list "
        "none from its address to mcpd's): a browser elsewhere, or in another network "
        "namespace, is not told apart"
    )
    raise OwnerUnknown(why + "".join(f"; {u}" for u in unread))


class ConnectionOwner:
    """The local user at the other end of one connection: looked up the first time
    it is asked for, then kept for the connection's life (its socket's owner does not
    change), a failure too."""

    __slots__ = ("_found", "_lookup")

    def __init__(self, lookup: Callable[[], int]) -> None:
        """``lookup``: the uid, or raises OwnerUnknown."""
        self._lookup = lookup
        self._found: int | str | None = None  # the uid, or why it is not known

    def uid(self) -> int:
        """The uid; raises OwnerUnknown, saying why."""
        if self._found is None:
            try:
                self._found = self._lookup()
            except OwnerUnknown as exc:
                self._found = str(exc)
        if isinstance(self._found, str):
            raise OwnerUnknown(self._found)
        return self._found
