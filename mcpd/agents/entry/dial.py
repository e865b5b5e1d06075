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
import grp
import os
import socket
import stat
import struct
import time
from typing import Final

from protocol.shown.visible import quote

from ...local.ownership.owners import trusted_owners, user_name

# What the command line's listings for a person (`mcpd tools`, `prompts` and `resources`
# printed as tables) say first on their connection, so it is no agent and the terminal
# may still approve (``policy.deciders.kin``). What a program reads (`--json`, `--format`) and
# every call never say it: a program that hands a model the tools and runs its calls is
# that model's host. A model that runs a listing through a shell tool gains nothing: it
# makes no process of its host any less an agent's.
COMMAND_LINE: Final = "mcpd/commandLine"
# What `mcpd call` says on its connection, to be told when a call of its waits for a
# person (``WAITING``, with the call's id and how long it waits): its user has no form
# to answer in, and would take the silence for a hang.
TELL_WAITS: Final = "mcpd/tellWaits"
WAITING: Final = "mcpd/waiting"
# How a person starts the daemon a client found none of.
STARTING: Final = "`mcpd serve` or `systemctl start mcpd`"
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


SYSTEM_SOCKET: Final = "/run/mcpd/mcpd.sock"  # mcpd.socket's ListenStream=


def no_daemon(path: str, exc: OSError) -> str | None:
    """Why ``connect_unix`` failed with ``exc``, in words for people, when the reason is
    not that no daemon is there (the socket's permissions keep the caller out, the path
    is no socket); None when nobody listens on it."""
    if isinstance(exc, PermissionError):
        return _refused_by_mode(path)
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISSOCK(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a regular file"
        return f"{path} is {kind}, not a socket: mcpd's socket is another path"
    return None


def not_listening(path: str, exc: OSError) -> str:
    """That nobody listens on ``path``, and where a daemon may be found instead. The
    path is quoted: a space or a control character a typed one picked up shows."""
    return f"no mcpd is listening on {quote(path)} ({exc.strerror}){_system_hint(path)}"


def _system_hint(path: str) -> str:
    # A user's commands look for their own daemon by default: the service's socket is
    # the one thing they may be meaning instead.
    if path == SYSTEM_SOCKET or not os.path.exists(SYSTEM_SOCKET):
        return ""
    return f"; a system mcpd listens on {SYSTEM_SOCKET}: use --socket or MCPD_SOCKET"


def _refused_by_mode(path: str) -> str:
    """Why the kernel refused the connection (the socket file's permissions), and
    whom to ask."""
    text = f"not allowed to connect to {path}: the socket's file permissions keep you out"
    try:
        st = os.stat(path)
    except OSError:
        return text
    if st.st_mode & 0o020:
        try:
            group = grp.getgrgid(st.st_gid).gr_name
        except KeyError:
            group = str(st.st_gid)
        return f"{text} (ask to be added to group {group})"
    return f"{text} (mode {st.st_mode & 0o777:04o}: its owner only)"
