"""A sandboxed server's Landlock domain: entered by the thread that starts sandboxed
servers (``confined``), and, run by path as a step of a command line, by the process
that runs the rest of it (a server that joins a network namespace: after nsenter,
before bubblewrap).

Bubblewrap gives a server the host's network namespace at the default level, and with
it the host's abstract Unix sockets (an X server's, a D-Bus bus at an ``abstract=``
address), which no mount can hide: they have no path. A Landlock domain scoped to
abstract sockets and signals stops a process in it from connecting to an abstract
socket bound outside it and from signalling a process outside it; between the
server's own processes (bubblewrap, the server, what it starts: all born in it)
both keep working. Only that thread and this step's own process enter the domain.

Run as ``python -I -S landlock.py COMMAND...``: stdlib only, and no import of the
package it sits in. mcpd imports it too, for ``scoping`` (whether to use it) and
``restrict_self``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys
from typing import Final

# The generic syscall table's numbers, which x86_64 shares for these calls.
_SYSCALLS: Final = {"x86_64": (444, 446), "aarch64": (444, 446)}
_CREATE_RULESET_VERSION: Final = 1
_PR_SET_NO_NEW_PRIVS: Final = 38
SCOPE_ABSTRACT_UNIX_SOCKET: Final = 1
SCOPE_SIGNAL: Final = 2
# The first ABI whose rulesets take ``scoped`` (Linux 6.12).
SCOPED_ABI: Final = 6
# Its exit status when it stops before the server runs (having said why on stderr).
FAILED: Final = 126


class Unavailable(Exception):
    """Landlock cannot scope a domain here; the message says why."""


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _numbers() -> tuple[int, int]:
    machine = os.uname().machine
    found = _SYSCALLS.get(machine)
    if found is None:
        raise Unavailable(f"Landlock's system calls are not known on {machine}")
    return found


def ruleset_attr(scoped: int) -> bytes:
    """``struct landlock_ruleset_attr`` handling no file or network access, only the
    ``scoped`` bits: three native-endian 64-bit fields."""
    return struct.pack("=QQQ", 0, 0, scoped)


def abi() -> int:
    """The kernel's Landlock ABI version. Raises Unavailable saying why there is none."""
    create, _ = _numbers()
    libc = _libc()
    version = libc.syscall(
        create, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
    )
    if version >= 0:
        return int(version)
    err = ctypes.get_errno()
    if err == errno.ENOSYS:
        raise Unavailable("the kernel has no Landlock (Linux 5.13 or later, built with it)")
    if err == errno.EPERM:
        raise Unavailable("Landlock's system calls are refused (a system call filter)")
    if err == errno.EOPNOTSUPP:
        raise Unavailable("Landlock is disabled at boot (it is not in the kernel's lsm= list)")
    raise Unavailable(f"Landlock cannot be queried: {os.strerror(err)}")


def scoping() -> str | None:
    """None when a domain can be scoped to abstract sockets and signals; else why not."""
    try:
        version = abi()
    except Unavailable as exc:
        return str(exc)
    if version < SCOPED_ABI:
        return (
            f"the kernel's Landlock is ABI {version}; scoping needs ABI {SCOPED_ABI} (Linux 6.12)"
        )
    return None


def restrict_self() -> None:
    """Put this process in a domain scoped to abstract Unix sockets and signals.
    Raises OSError when the kernel refuses."""
    create, restrict = _numbers()
    libc = _libc()
    attr = ruleset_attr(SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = libc.syscall(create, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    try:
        # Landlock asks it of a process without CAP_SYS_ADMIN; bubblewrap sets it anyway.
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
        if libc.syscall(restrict, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: landlock.py COMMAND [ARG...]", file=sys.stderr)
        return 2
    try:
        restrict_self()
    except (OSError, Unavailable) as exc:
        # mcpd only puts this step in a command line where the kernel offers scoping:
        # a refusal here is unexpected, and the server does not start unconfined.
        print(f"mcpd: cannot scope the sandbox with Landlock: {exc}", file=sys.stderr)
        return FAILED
    try:
        os.execv(argv[0], argv)
    except OSError as exc:
        print(f"mcpd: cannot run {argv[0]}: {exc.strerror}", file=sys.stderr)
    return FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
