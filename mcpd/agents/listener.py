"""The agents' Unix socket: bound with its mode already set, never stealing a live one,
and removed on the way out only if it is still the one we bound."""

from __future__ import annotations

import contextlib
import os
import socket as stdsocket
import stat

import trio


class DaemonError(Exception):
    """The daemon cannot start (socket taken, unusable path)."""


async def open_unix_listener(path: str, mode: int) -> trio.SocketListener:
    """Bind ``path`` with ``mode`` already set, replacing a stale socket file."""
    directory = os.path.dirname(path) or "."
    try:
        os.makedirs(directory, mode=0o755, exist_ok=True)
    except OSError as exc:
        raise DaemonError(f"cannot create the socket directory {directory!r}: {exc}") from None
    await _refuse_live_socket(path)
    sock = trio.socket.socket(stdsocket.AF_UNIX, stdsocket.SOCK_STREAM)
    # Bind under a temporary name and rename into place, so the socket is never
    # reachable with the umask's permissions instead of ``mode``.
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    try:
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
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def unlink_if_ours(path: str, ours: os.stat_result) -> None:
    """Remove the socket file we bound, unless another one (say mcpd.socket's) has
    taken its place since."""
    with contextlib.suppress(OSError):
        st = os.lstat(path)
        if stat.S_ISSOCK(st.st_mode) and (st.st_dev, st.st_ino) == (ours.st_dev, ours.st_ino):
            os.unlink(path)
