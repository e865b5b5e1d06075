"""Who listens on a TCP port that mcpd could not listen on.

The kernel's tables of TCP sockets (``/proc/net/tcp``, ``/proc/net/tcp6``) list every
listening socket of mcpd's network namespace with the uid that made it, whoever that
is; which process holds it shows only to a reader of that process's descriptors
(its own user, or root). A socket listening on every address (``0.0.0.0``, ``::``)
takes the port from each of them.
"""

from __future__ import annotations

import sys
import time
from typing import Final

import msgspec

from protocol.proctcp import IP, listening_on, plain

from .tcpowner import TABLES, holding

# How long the processes are looked through for the one holding the socket.
_LOOK: Final = 2.0


class PortHolder(msgspec.Struct, frozen=True):
    """The user who listens on the port, and those of its processes mcpd can see
    holding the socket (none where it cannot read them)."""

    uid: int
    pids: list[int]


def port_holder(ip: IP, port: int, tables: tuple[str, ...] = TABLES) -> PortHolder | None:
    """Who listens on ``port`` at ``ip`` or at every address; None when the tables name
    nobody (they cannot be read, or the listener is in another network namespace)."""
    want = plain(ip)
    for path in tables:
        try:
            with open(path, encoding="ascii", errors="replace") as table:
                found = listening_on(table, port, sys.byteorder)
        except OSError:
            continue
        for at, held in found:
            if at == want or at.is_unspecified:
                try:
                    pids = holding(held, until=time.monotonic() + _LOOK)
                except (OSError, TimeoutError):
                    pids = []
                return PortHolder(held.uid, pids)
    return None


def process_name(pid: int) -> str:
    """``pid``'s command name, as /proc says it ("" once it is gone)."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as comm:
            return comm.read().strip()
    except OSError:
        return ""
