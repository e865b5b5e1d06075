"""A server's network namespace made before it starts, holding mcpd's listeners on the
host loopback ports its ``loopback`` grants; no trio here (``process.launch``).

Why made beforehand rather than inside bubblewrap's: a listener made in the namespace
before the server's command exists cannot be raced by it (the server cannot take the
port first, nor connect before anyone listens), and no step waits on bubblewrap.

A short helper (a fresh interpreter: ``unshare`` of a user namespace needs a process
with one thread) makes a user namespace mapping only mcpd's own user and group, and a
network namespace in it; brings its loopback up; binds ``127.0.0.1:PORT`` for each
port; and hands the listeners and both namespaces back over a socket pair, then exits.
The namespaces live on through those descriptors; bubblewrap joins them by path
(``/proc/MCPD/fd/N``) through ``nsenter``. Nothing else is in that namespace: what the
server reaches there is its own loopback and those listeners, which mcpd relays each to
the same port on the host's loopback, and to nothing else (``relay``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from typing import Final

from ..sandbox.plan import Netns, Sandbox, SandboxError

_TIMEOUT: Final = 10.0
_HELPER: Final = r"""
import ctypes, fcntl, os, socket, struct, sys
back = socket.socket(fileno=int(sys.argv[1]))
uid, gid = os.getuid(), os.getgid()
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(0x10000000 | 0x40000000) != 0:
    sys.exit("cannot make a user and network namespace: " + os.strerror(ctypes.get_errno()))
for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                   ("gid_map", f"{gid} {gid} 1")):
    with open(f"/proc/self/{name}", "w") as f:
        f.write(text)
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    fcntl.ioctl(s, 0x8914, struct.pack("16sh22x", b"lo", 0x1 | 0x8 | 0x40))
fds = [os.open("/proc/self/ns/user", os.O_RDONLY), os.open("/proc/self/ns/net", os.O_RDONLY)]
listeners = []
for port in sys.argv[2:]:
    listeners.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    try:
        listeners[-1].bind(("127.0.0.1", int(port)))
    except OSError as exc:
        sys.exit(f"cannot listen on 127.0.0.1:{port} in it: {exc.strerror}")
    listeners[-1].listen(64)
socket.send_fds(back, [b"ok"], fds + [s.fileno() for s in listeners])
"""


class HostLoopback:
    """A made namespace: its paths for ``nsenter``, and a listener per granted port."""

    def __init__(self, user: int, net: int, listeners: list[tuple[socket.socket, int]]) -> None:
        self._fds = [user, net]
        self.netns = Netns(f"/proc/{os.getpid()}/fd/{user}", f"/proc/{os.getpid()}/fd/{net}")
        self.listeners = listeners

    def close(self) -> None:
        for sock, _ in self.listeners:
            sock.close()
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []


def make(sandbox: Sandbox) -> HostLoopback:
    """The namespace for ``sandbox.loopback``. Raises SandboxError naming what failed."""
    where = f"{sandbox.where}.host_loopback"
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours:
        try:
            with theirs:
                done = subprocess.run(
                    [sys.executable, "-I", "-S", "-c", _HELPER, str(theirs.fileno())]
                    + [str(p) for p in sandbox.loopback],
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                    timeout=_TIMEOUT,
                )
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError(f"{where} cannot be set up: {exc}") from None
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            why = lines[-1] if lines else f"its helper exited with {done.returncode}"
            raise SandboxError(f"{where} cannot be set up: {why}")
        ours.setblocking(False)
        try:
            _, fds, _, _ = socket.recv_fds(ours, 16, len(sandbox.loopback) + 2)
        except OSError as exc:
            raise SandboxError(f"{where} cannot be set up: {exc}") from None
    for fd in fds:
        # Received without close-on-exec: no other child of mcpd may inherit them.
        os.set_inheritable(fd, False)
    if len(fds) != len(sandbox.loopback) + 2:
        for fd in fds:
            os.close(fd)
        raise SandboxError(f"{where} cannot be set up: its listeners did not come back")
    listeners = [
        (socket.socket(fileno=fd), port) for fd, port in zip(fds[2:], sandbox.loopback, strict=True)
    ]
    return HostLoopback(fds[0], fds[1], listeners)
