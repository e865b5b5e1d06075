"""How mcpd's own clients (the command line, the bridge) connect to the daemon's socket.

A connect that may not wait is answered EAGAIN at once by a Unix socket whose listen
queue is full. Anyone the socket's mode lets connect can keep it full for a while
(connecting and hanging up, over and over, even when the daemon refuses them), and a
client that gave up there would fail although the daemon makes room many times a
second. So the connect waits in the kernel, which wakes it each time the daemon
accepts, until a deadline; only then does it give up, saying the queue stayed full.

Blocking, with no event loop: the bridge runs it in a thread.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import time
from typing import Final

from ..local.owners import trusted_owners, user_name

# How long a client waits for room in the daemon's listen queue.
CONNECT_WAIT: Final = 10.0
# The shortest wait handed to the kernel: a zero SO_SNDTIMEO would mean no limit.
_LEAST: Final = 0.001


class DialError(Exception):
    """Why the daemon's socket was not connected to, in words for people."""


class QueueFull(DialError):
    """The daemon's listen queue had no room for us until the deadline."""

    def __init__(self, path: str, wait: float) -> None:
        super().__init__(
            f"mcpd on {path} took no new connection within {wait:g} s: its listen queue "
            "stayed full (something is opening connections to it faster than it takes "
            "them, perhaps another user); try again"
        )


class ForeignSocket(DialError):
    """The socket, whose queue is full, is another user's: nothing to wait for."""

    def __init__(self, path: str, uid: int) -> None:
        super().__init__(
            f"the socket {path}, whose listen queue is full, belongs to uid {uid} "
            f"({user_name(uid)}), not you, root or the mcpd service user: not waiting for it"
        )


def connect_unix(path: str, wait: float = CONNECT_WAIT) -> socket.socket:
    """A blocking socket connected to ``path``, having waited up to ``wait`` seconds for
    room in its listen queue; raises ``QueueFull`` then (``ForeignSocket`` at once for a
    socket another user made), and the ``OSError`` of any other failure (no such file,
    nobody listening, permissions) at once."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        deadline = time.monotonic() + wait
        # The first try does not wait: a full queue of a socket another user made is
        # theirs to fill, and is not waited for.
        first = True
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise QueueFull(path, wait)
            waits = _LEAST if first else max(left, _LEAST)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(waits))
            try:
                sock.connect(path)
            except BlockingIOError:
                if first:
                    first = False
                    owner = os.stat(path).st_uid
                    if owner not in trusted_owners():
                        raise ForeignSocket(path, owner) from None
                continue  # the kernel's wait ran out: the deadline is (all but) reached
            if _connected(sock):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(0))
                return sock
    except BaseException:
        sock.close()
        raise


def _connected(sock: socket.socket) -> bool:
    # A signal that ends the kernel's wait makes Python take the connect for one under
    # way and report it done, on a socket that is connected to nothing.
    try:
        sock.getpeername()
    except OSError as exc:
        if exc.errno == errno.ENOTCONN:
            return False
        raise
    return True


def _timeval(seconds: float) -> bytes:
    whole = int(seconds)
    return struct.pack("@ll", whole, int((seconds - whole) * 1_000_000))
