"""A stdio server that tries to take mcpd's places as it starts: it binds and listens on
each TCP address and Unix socket path it is given, notes in a file what it got, keeps
what it got open, and becomes the scripted server.

    squatter.py NOTES (tcp:HOST:PORT | unix:PATH)... -- SCRIPTED_ARGS...

Each line of NOTES is ``TARGET taken`` or ``TARGET refused ERRNO_NAME``. Plain stdlib.
"""

from __future__ import annotations

import errno
import os
import socket
import sys

SCRIPTED = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "servers", "scripted.py"
)


def take(target: str) -> tuple[str, socket.socket | None]:
    kind, _, where = target.partition(":")
    if kind == "tcp":
        host, _, port = where.rpartition(":")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        address: str | tuple[str, int] = (host, int(port))
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        address = where
    try:
        sock.bind(address)
        sock.listen()
    except OSError as exc:
        sock.close()
        return f"{target} refused {errno.errorcode.get(exc.errno or 0, str(exc))}", None
    sock.set_inheritable(True)  # held by the server it becomes
    return f"{target} taken", sock


def main() -> None:
    notes, *rest = sys.argv[1:]
    split = rest.index("--")
    held = []
    lines = []
    for target in rest[:split]:
        line, sock = take(target)
        lines.append(line)
        held.append(sock)
    with open(notes, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.execv(sys.executable, [sys.executable, SCRIPTED, *rest[split + 1 :]])


if __name__ == "__main__":
    main()
