"""A stand-in for mcpd on a Unix socket, in a thread: each request line it reads is
handed to ``answer``, which returns the raw bytes to send back (anything, broken
replies included) or None to hang up. For tests of the blocking client and of the
commands that use it, without a daemon."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

Answer = Callable[[dict[str, Any]], bytes | None]


def result(msg: dict[str, Any], value: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": value}).encode() + b"\n"


def error(msg: dict[str, Any], code: int, message: str, data: Any = None) -> bytes:
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": body}).encode() + b"\n"


def notification(method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode() + b"\n"


class FakeDaemon:
    """Listens on ``path`` while in its ``with`` block; ``requests`` holds every
    request read, in order, and ``notifications`` every notification (which ``answer``
    is not given: the command line says one first on each connection)."""

    def __init__(self, path: Path, answer: Answer) -> None:
        self.path = path
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self.notifications: list[dict[str, Any]] = []
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> FakeDaemon:
        self._listener.bind(str(self.path))
        self._listener.listen(4)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        # Wakes the accept() the thread is blocked in (Linux), so it ends.
        self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(timeout=10)
        assert not self._thread.is_alive()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                self._talk(conn)

    def _talk(self, conn: socket.socket) -> None:
        buf = b""
        while True:
            try:
                chunk = conn.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while b"\n" in buf:
                line, _, buf = buf.partition(b"\n")
                msg = json.loads(line)
                if isinstance(msg, dict) and "method" in msg and "id" not in msg:
                    self.notifications.append(msg)
                    continue
                self.requests.append(msg)
                reply = self.answer(msg)
                if reply is None:
                    return
                conn.sendall(reply)


def answering(sock: Path, **answers: Any) -> FakeDaemon:
    """A stand-in answering each method (``tools/list`` as ``tools_list``) with a result,
    or with what a callable makes of the request; any other, as the daemon answers a
    method it does not know."""

    def answer(msg: dict[str, Any]) -> bytes | None:
        reply = answers.get(msg["method"].replace("/", "_"))
        if reply is None:
            return error(msg, -32601, f"method not found: {msg['method']}")
        return reply(msg) if callable(reply) else result(msg, reply)

    return FakeDaemon(sock, answer)
