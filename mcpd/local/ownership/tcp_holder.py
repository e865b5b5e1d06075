"""Which local user, and which of its processes, hold the other end of a TCP
connection mcpd accepted.

A loopback connection's other end is a socket of this machine, and Linux knows every
socket of mcpd's network namespace with the uid that made it. mcpd asks the kernel for
that one socket by its addresses (netlink ``sock_diag``, ``protocol.linux.sockdiag``), which
costs the same however many sockets there are; where that cannot be asked, it reads
the lists of them all in ``/proc/net/tcp`` and ``/proc/net/tcp6``
(``protocol.linux.proctcp``), which the kernel writes out at each read. A connection from
another machine, or from another network namespace, is not found either way: its holder
is unknown, and whoever asks refuses what takes one. A connection from an address of
this machine (its loopback, or one of its interfaces') whose other end is not found,
or is found held by no process (closed, perhaps with its request still on its way to
mcpd), came from a process here that is gone from it: who that was cannot be told, so
it may have been one of mcpd's servers (``ServerNotRuledOut``), which is not the same
as a stranger's.

Either way names the socket's inode too, and its holders are the processes with a
descriptor that links to it (``/proc/PID/fd``), found among that user's processes
(``holding``): the kernel keeps no list of them, so finding them reads each of those
processes' descriptors, and is asked for only when it must be.
"""

from __future__ import annotations

import errno
import ipaddress
import itertools
import os
import socket
import sys
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from protocol.linux import sockdiag
from protocol.linux.proctcp import IP, Address, HeldSocket, plain, socket_holder

if TYPE_CHECKING:
    import trio

TABLES: Final = ("/proc/net/tcp", "/proc/net/tcp6")
_sequence = itertools.count(1)


class HolderUnknown(Exception):
    """Who holds a connection's other end cannot be told; the message says why."""


class ServerNotRuledOut(HolderUnknown):
    """Who holds a connection from this machine cannot be told, so it may be one of
    mcpd's servers: no process holds it, none that mcpd can read does, or none was
    found in time."""


def on_this_machine(ip: IP) -> bool:
    """Whether ``ip`` is an address of this machine, in mcpd's network namespace: a
    loopback one, or one a socket here may be bound to."""
    ip = plain(ip)
    if ip.is_loopback:
        return True
    family = socket.AF_INET6 if isinstance(ip, ipaddress.IPv6Address) else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((str(ip), 0))
    except OSError as exc:
        # An address that is not this machine's cannot be bound; any other failure
        # leaves it one that may be.
        return exc.errno != errno.EADDRNOTAVAIL
    return True


def _unheld(peer: Address, why: str) -> HolderUnknown:
    """Why ``peer``'s socket is not found held (``why``: where it was looked for)."""
    if on_this_machine(peer[0]):
        return ServerNotRuledOut(
            f"no process holds its other end, a socket of this machine ({why}): it was "
            "closed or passed on before mcpd looked, and nothing tells who held it from "
            "one of mcpd's servers"
        )
    return HolderUnknown(
        f"no process of this machine holds its other end ({why}): a client elsewhere, "
        "or in another network namespace, is not told apart"
    )


def _address(sockaddr: object) -> Address:
    if not isinstance(sockaddr, tuple) or len(sockaddr) < 2:
        raise HolderUnknown(f"the connection is not TCP over IP ({sockaddr!r})")
    host, port = sockaddr[0], sockaddr[1]
    try:
        return ipaddress.ip_address(str(host).partition("%")[0]), int(port)
    except ValueError:
        raise HolderUnknown(f"the address {host!r} cannot be read") from None


class _NoDiag(Exception):
    """The kernel cannot be asked through netlink here."""


def _netlink() -> socket.socket:
    return socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, sockdiag.NETLINK_SOCK_DIAG)


def kernel_holder(local: Address, remote: Address) -> HeldSocket | None:
    """The socket at ``local`` connected to ``remote``, as the kernel says (None: it
    knows none, or none a process holds); raises _NoDiag when it cannot be asked. Its
    answer comes with the request: nothing waits."""
    try:
        nl = _netlink()
    except (OSError, AttributeError) as exc:
        raise _NoDiag(str(exc)) from None
    with nl:
        nl.settimeout(1.0)
        for body in sockdiag.requests(local, remote):
            request = sockdiag.numbered(body, next(_sequence) & 0xFFFFFFFF)
            try:
                nl.send(request)
                held = sockdiag.holder(nl.recv(8192), request)
            except (OSError, ValueError, sockdiag.DiagRefused) as exc:
                raise _NoDiag(str(exc)) from None
            if held is not None:
                return held
    return None


def tcp_holder(
    sock: trio.socket.SocketType, tables: tuple[str, ...] = TABLES, ask_kernel: bool = True
) -> HeldSocket:
    """The socket at the other end of ``sock``: its user and inode; raises HolderUnknown.
    ``ask_kernel``: through netlink first (the tables alone when False)."""
    try:
        own, peer = _address(sock.getsockname()), _address(sock.getpeername())
    except OSError as exc:
        # Its other end's address went with it: it may have been anywhere, here too.
        raise ServerNotRuledOut(f"the connection is gone ({exc.strerror})") from None
    if ask_kernel:
        try:
            held = kernel_holder(peer, own)
        except _NoDiag:
            pass  # the tables, then
        else:
            if held is not None:
                return held
            raise _unheld(peer, "the kernel names none from its address to mcpd's")
    unread = []
    for path in tables:
        try:
            # Read as it comes (the table may be long), from mcpd's own namespace.
            with open(path, encoding="ascii", errors="replace") as table:
                found = socket_holder(table, peer, own, sys.byteorder)
        except OSError as exc:
            unread.append(f"{path}: {exc.strerror or exc}")
            continue
        if found is not None:
            return found
    if len(unread) == len(tables):
        raise HolderUnknown(f"the sockets' tables cannot be read ({'; '.join(unread)})")
    why = f"{' and '.join(tables)} list none from its address to mcpd's"
    raise _unheld(peer, why + "".join(f"; {u}" for u in unread))


def holding(held: HeldSocket, until: float | None = None) -> list[int]:
    """The processes with a descriptor of the socket ``held``: those of its user, and
    those /proc shows as root's (a process that made itself undumpable, which mcpd
    reads only when it runs as root). A process that cannot be read is passed over.
    Raises TimeoutError once the clock (``time.monotonic``) passes ``until``, between
    two processes."""
    link = f"socket:[{held.inode}]"
    found = []
    with os.scandir("/proc") as entries:
        for entry in entries:
            if until is not None:
                _in_time(until)
            if entry.name.isdigit() and _holds_as(entry, held.uid, link):
                found.append(int(entry.name))
    return found


def _holds_as(entry: os.DirEntry[str], uid: int, link: str) -> bool:
    """Whether the process of /proc's ``entry``, ``uid``'s or shown as root's, holds the
    socket ``link``; False for one that cannot be read."""
    try:
        if entry.stat().st_uid not in (uid, 0):
            return False
    except OSError:
        return False
    return holds(entry.path, link)


def first_holders(held: HeldSocket, first: Iterable[int], until: float) -> list[int]:
    """The processes with a descriptor of ``held``, found cheaply: among ``first``
    and their descendants, all of those that hold it; where none does, the first other
    process of its user (or shown as root's) that does, if any. Raises TimeoutError
    once the clock (``time.monotonic``) passes ``until``, between two processes."""
    link = f"socket:[{held.inode}]"
    looked: set[int] = set()
    found = []
    for pid in _with_descendants(first):
        _in_time(until)
        looked.add(pid)
        if holds(f"/proc/{pid}", link):
            found.append(pid)
    if found:
        return found
    with os.scandir("/proc") as entries:
        rest = [e for e in entries if e.name.isdigit() and int(e.name) not in looked]
    # The newest first: a process that just connected is more often a new one than not,
    # and the older ones a scan would pass over first are those that hold the most.
    for entry in sorted(rest, key=lambda e: int(e.name), reverse=True):
        _in_time(until)
        if _holds_as(entry, held.uid, link):
            return [int(entry.name)]
    return []


def _in_time(until: float) -> None:
    if time.monotonic() > until:
        raise TimeoutError("the processes that hold it were looked for too long")


def _with_descendants(roots: Iterable[int]) -> list[int]:
    """``roots`` and every process below them, as each thread's ``children`` lists
    them (a process gone, or a kernel without the list, adds none)."""
    found: list[int] = []
    todo = list(roots)
    seen: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        found.append(pid)
        try:
            with os.scandir(f"/proc/{pid}/task") as tasks:
                for task in tasks:
                    try:
                        with open(f"{task.path}/children", encoding="ascii") as f:
                            todo.extend(int(c) for c in f.read().split())
                    except (OSError, ValueError):
                        continue
        except OSError:
            continue
    return found


def holds(process: str, link: str) -> bool:
    """Whether the process at ``process`` (``/proc/PID``) has a descriptor linking to
    ``link``."""
    try:
        with os.scandir(f"{process}/fd") as fds:
            for fd in fds:
                try:
                    if os.readlink(fd.path) == link:
                        return True
                except OSError:
                    continue
    except OSError:
        pass
    return False
