"""The agents' Unix socket: bound with its mode already set, never stealing a live one,
and removed on the way out only if it is still the one we bound.

It is bound only in a directory where nobody but the daemon's user and root can put
another socket in its place: the directory and every one above it must belong to
one of them and be writable by nobody else (a sticky one such as /tmp, where only an
entry's owner may remove or rename it, is fine). A missing directory is
made private, or 0755 when the socket's own mode lets others in."""

from __future__ import annotations

import contextlib
import os
import socket as stdsocket
import stat

import trio

from .peers import user_name


class DaemonError(Exception):
    """The daemon cannot start (socket taken, unusable path)."""


class UnsafeDirectory(DaemonError):
    """Someone else could replace the socket: a place to change, as a config error is."""


async def open_unix_listener(path: str, mode: int) -> trio.SocketListener:
    """Bind ``path`` with ``mode`` already set, replacing a stale socket file."""
    directory = os.path.dirname(path) or "."
    try:
        os.makedirs(directory, mode=0o755 if mode & 0o077 else 0o700, exist_ok=True)
    except OSError as exc:
        raise DaemonError(f"cannot create the socket directory {directory!r}: {exc}") from None
    problem = unsafe_directory(directory)
    if problem is not None:
        raise UnsafeDirectory(f"will not listen on {path}: {problem}")
    await _refuse_live_socket(path)
    sock = trio.socket.socket(stdsocket.AF_UNIX, stdsocket.SOCK_STREAM)
    # Bind under a temporary name and rename into place, so the socket is never
    # reachable with the umask's permissions instead of ``mode``.
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}")
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        await sock.bind(tmp)
        os.chmod(tmp, mode)
        os.rename(tmp, path)
        sock.listen(512)
    except OSError as exc:
        sock.close()
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise DaemonError(f"cannot listen on {path!r}: {exc.strerror or exc}") from None
    return trio.SocketListener(sock)


def unsafe_directory(directory: str) -> str | None:
    """Why someone other than this user and root could replace a socket in
    ``directory``, or None."""
    mine = os.geteuid()
    allowed = "root" if mine == 0 else f"you (uid {mine}) or root"
    at = own = os.path.realpath(directory)
    while True:
        try:
            st = os.stat(at)
        except OSError as exc:
            return f"cannot check {at}: {exc.strerror}"
        what = "the socket directory" if at == own else "a directory above the socket"
        if st.st_uid not in (mine, 0):
            return (
                f"{what} {at} belongs to uid {st.st_uid} ({user_name(st.st_uid)}), not to "
                f"{allowed}: its owner could put a socket of their own in "
                "mcpd's place; remove it or choose another socket path"
            )
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return (
                f"{what} {at} is writable by others (mode {stat.S_IMODE(st.st_mode):04o}): "
                f"anyone could put a socket of their own in mcpd's place; chmod go-w {at} "
                "or choose another socket path"
            )
        parent = os.path.dirname(at)
        if parent == at:
            return None
        at = parent


async def _refuse_live_socket(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise DaemonError(f"{path!r} exists and is not a socket; not replacing it")
    probe = trio.socket.socket(stdsocket.AF_UNIX, stdsocket.SOCK_STREAM)
    try:
        with trio.move_on_after(2):
            await probe.connect(path)
            raise DaemonError(f"another mcpd is listening on {path}")
    except (ConnectionRefusedError, FileNotFoundError):
        pass  # a stale file left by a daemon that died
    finally:
        probe.close()
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    except OSError as exc:
        raise DaemonError(f"cannot remove the stale socket {path}: {exc.strerror}") from None


def unlink_if_ours(path: str, ours: os.stat_result) -> None:
    """Remove the socket file we bound, unless another one (say mcpd.socket's) has
    taken its place since."""
    with contextlib.suppress(OSError):
        st = os.lstat(path)
        if stat.S_ISSOCK(st.st_mode) and (st.st_dev, st.st_ino) == (ours.st_dev, ours.st_ino):
            os.unlink(path)
