"""Linux's socket diagnostics over netlink (``sock_diag``), as bytes: a request for the
one TCP socket of this machine with a given pair of addresses, and the owner its reply
names.

The kernel finds that socket by its addresses, at once, where the text tables
(``proctcp``) list every socket and take time in proportion. The request names the
socket from its own side: its address (``local``) and its peer's (``remote``); for the
other end of a connection mcpd accepted, the peer mcpd sees and mcpd's own address.
The reply carries the socket's addresses, its uid and the inode of its file (0 when no
process holds it any more, as after a close); a socket that is not the one asked for
(a listener, whose peer is no address) names nobody. An IPv4 peer may be an IPv4
socket or an IPv6 one speaking IPv4 (its addresses mapped, ``::ffff:a.b.c.d``): the
two are two questions (``requests``).

Nothing here opens a socket.
"""

from __future__ import annotations

import ipaddress
import struct
from typing import Final

from .proctcp import IP, Address, HeldSocket, plain

SOCK_DIAG_BY_FAMILY: Final = 20
NETLINK_SOCK_DIAG: Final = 4
_NLMSG_ERROR: Final = 2
_NLM_F_REQUEST: Final = 1
_AF_INET: Final = 2
_AF_INET6: Final = 10
_IPPROTO_TCP: Final = 6
_ENOENT: Final = 2
_ALL_STATES: Final = 0xFFFFFFFF
_NO_COOKIE: Final = 0xFFFFFFFF

_HEADER: Final = struct.Struct("=IHHII")  # length, type, flags, sequence, port id
_REQUEST: Final = struct.Struct("=BBBBI")  # family, protocol, extensions, pad, states
_PORTS: Final = struct.Struct("!HH")  # the socket's port, its peer's (network order)
_TAIL: Final = struct.Struct("=III")  # interface, and the cookie's two words
_ERROR: Final = struct.Struct("=i")
# The reply: family, state, timer, retransmits; the socket's id as in the request
# (ports, two addresses of 16 bytes, interface, cookie); expiry, queues; uid, inode.
_REPLY_HEAD: Final = struct.Struct("=BBBB")
_REPLY_OWNER: Final = struct.Struct("=II")
_ID_AT: Final = _REPLY_HEAD.size
_OWNER_AT: Final = _REPLY_HEAD.size + 48 + 12


class DiagRefused(Exception):
    """The kernel refused the question (``errno``: why), as opposed to knowing no
    such socket."""

    def __init__(self, errno: int) -> None:
        super().__init__(f"sock_diag refused the request (errno {errno})")
        self.errno = errno


def requests(local: Address, remote: Address) -> list[bytes]:
    """The requests that may find the socket at ``local`` connected to ``remote``,
    to be asked in turn (without sequence numbers: see ``numbered``)."""
    here, there = plain(local[0]), plain(remote[0])
    if isinstance(here, ipaddress.IPv4Address) and isinstance(there, ipaddress.IPv4Address):
        return [
            _body(_AF_INET, local[1], remote[1], _v4(here), _v4(there)),
            _body(_AF_INET6, local[1], remote[1], _mapped(here), _mapped(there)),
        ]
    return [_body(_AF_INET6, local[1], remote[1], _v6(here), _v6(there))]


def numbered(body: bytes, seq: int) -> bytes:
    """``body`` as one netlink message with sequence number ``seq``."""
    return (
        _HEADER.pack(_HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, seq, 0) + body
    )


def owner(reply: bytes, request: bytes) -> int | None:
    """The uid the kernel names in ``reply`` for the socket ``request`` (a numbered
    one) asked for; None when it knows no such socket, or one no process holds.
    Raises DiagRefused for a refusal and ValueError for a reply that is no answer to
    ``request``."""
    held = holder(reply, request)
    return None if held is None else held.uid


def holder(reply: bytes, request: bytes) -> HeldSocket | None:
    """The socket ``reply`` names for ``request`` (``owner``), with its inode."""
    if len(reply) < _HEADER.size + _ERROR.size:
        raise ValueError("a sock_diag reply shorter than its header")
    length, kind, _flags, seq, _port = _HEADER.unpack_from(reply)
    if length > len(reply) or seq != _HEADER.unpack_from(request)[3]:
        raise ValueError("a sock_diag reply that answers another request")
    if kind == _NLMSG_ERROR:
        (err,) = _ERROR.unpack_from(reply, _HEADER.size)
        if -err == _ENOENT:
            return None
        raise DiagRefused(-err)
    body = reply[_HEADER.size : length]
    if kind != SOCK_DIAG_BY_FAMILY or len(body) < _OWNER_AT + _REPLY_OWNER.size:
        raise ValueError("a sock_diag reply of another kind")
    asked = request[_HEADER.size + _REQUEST.size :][: _PORTS.size + 32]
    if body[_ID_AT : _ID_AT + _PORTS.size + 32] != asked:
        return None  # another socket than the one asked for (a listener on that port)
    uid, inode = _REPLY_OWNER.unpack_from(body, _OWNER_AT)
    return HeldSocket(uid, inode) if inode else None


def _body(family: int, port: int, peer_port: int, here: bytes, there: bytes) -> bytes:
    return (
        _REQUEST.pack(family, _IPPROTO_TCP, 0, 0, _ALL_STATES)
        + _PORTS.pack(port, peer_port)
        + here
        + there
        + _TAIL.pack(0, _NO_COOKIE, _NO_COOKIE)
    )


def _v4(ip: ipaddress.IPv4Address) -> bytes:
    return ip.packed + bytes(12)


def _mapped(ip: ipaddress.IPv4Address) -> bytes:
    return ipaddress.IPv6Address(b"\0" * 10 + b"\xff\xff" + ip.packed).packed


def _v6(ip: IP) -> bytes:
    return ip.packed if isinstance(ip, ipaddress.IPv6Address) else _mapped(ip)
