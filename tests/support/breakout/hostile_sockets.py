"""The hostile test server's attacks through sockets: Unix sockets by path, abstract
ones, TCP listeners, an SSH agent and mcpd's own socket. Plain stdlib, imported from
beside ``hostile_server.py`` (no test code on its path in a sandbox)."""

from __future__ import annotations

import json
import os
import select
import socket
import threading
from typing import Any


def connect_unix(path: str) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(path)
    return f"connected to {path}"


def send_datagram(path: str, data: str) -> str:
    """One datagram to the socket at ``path``, as a native journal entry is sent."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(data.encode(), path)
    return f"sent to {path}"


def mcp_post(path: str, body: Any, headers: dict[str, str]) -> str:
    """POSTs ``body`` to ``/mcp`` on the Unix socket at ``path``, as a stateless HTTP
    client would: the whole HTTP reply."""
    data = json.dumps(body).encode()
    lines = [
        "POST /mcp HTTP/1.1",
        "Host: mcpd",
        "Connection: close",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"Content-Length: {len(data)}",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect(path)
        s.sendall("\r\n".join(lines).encode() + b"\r\n\r\n" + data)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    return reply.decode("utf-8", "replace")


def connect(host: str, port: int) -> str:
    with socket.create_connection((host, port), timeout=5):
        return f"connected to {host}:{port}"


KEPT: list[socket.socket] = []


def receive(host: str, port: int, keep: bool) -> str:
    """What the listener at host:port sends first; the connection kept open if ``keep``."""
    conn = socket.create_connection((host, port), timeout=30)
    got = conn.recv(200).decode("utf-8", "replace")
    if keep:
        KEPT.append(conn)
    else:
        conn.close()
    return f"received {got!r}"


def abstract(name: str) -> str:
    """What the listener on the abstract Unix socket ``name`` sends first."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect("\0" + name)
        return f"received {s.recv(200).decode('utf-8', 'replace')!r}"


def abstract_own(name: str) -> str:
    """An abstract socket of its own, bound here and connected to from a child it forks:
    what the child read from it."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind("\0" + name)
        listener.listen(1)
        reader, writer = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(reader)
            try:
                os.write(writer, abstract(name).encode())
            except BaseException as exc:
                os.write(writer, f"refused: {type(exc).__name__}: {exc}".encode())
            os._exit(0)
        os.close(writer)
        # The pipe is readable first when the child could not connect.
        ready, _, _ = select.select([listener, reader], [], [], 30)
        if listener in ready:
            conn, _ = listener.accept()
            with conn:
                conn.sendall(b"from its own process")
        os.waitpid(child, 0)
        with os.fdopen(reader, "rb") as f:
            got = f.read().decode("utf-8", "replace")
    if not got.startswith("received"):
        raise ConnectionRefusedError(got)
    return f"its child {got}"


SERVED: list[threading.Thread] = []


def abstract_serve(name: str) -> str:
    """An abstract socket ``name`` bound and listened on in a thread of this server, which
    greets whoever connects, as a local service would, until the server exits."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(8)

    def greet() -> None:
        while True:
            conn, _ = listener.accept()
            with conn:
                conn.sendall(f"hello from {name}".encode())

    SERVED.append(threading.Thread(target=greet, daemon=True))
    SERVED[-1].start()
    return f"listening on @{name}"


def hold_many(host: str, port: int, count: int) -> str:
    """Opens ``count`` connections at once, then reads each: how many the listener
    greeted and how many were closed unanswered, all held open until every one is read."""
    conns = [socket.create_connection((host, port), timeout=30) for _ in range(count)]
    try:
        firsts = [c.recv(200) for c in conns]
    finally:
        for c in conns:
            c.close()
    greeted = sum(1 for f in firsts if f)
    return f"greeted {greeted}, closed {count - greeted}"


def agent_keys(path: str) -> str:
    """How many keys the SSH agent listening on ``path`` offers (REQUEST_IDENTITIES)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(path)
        s.sendall(b"\x00\x00\x00\x01\x0b")
        answer = s.recv(4096)
    if answer[4:5] != b"\x0c":
        return f"answered {answer[:16]!r}"
    return f"the agent offers {int.from_bytes(answer[5:9], 'big')} keys"
