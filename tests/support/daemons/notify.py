"""The notify socket of a daemon started as systemd would start it: its sd_notify
datagrams (READY=1, STATUS=..., STOPPING=1), read in order."""

from __future__ import annotations

import socket
import time
from pathlib import Path


class Notifications:
    """The daemon's sd_notify datagrams, in order."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.seen: list[list[str]] = []

    def next_with(self, line: str, timeout: float = 20) -> list[str]:
        """The next datagram containing ``line`` (others on the way are kept in seen)."""
        deadline = time.monotonic() + timeout
        while True:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                message = self.sock.recv(65536).decode().splitlines()
            except TimeoutError:
                raise AssertionError(f"no {line!r} within {timeout}s: {self.seen}") from None
            self.seen.append(message)
            if line in message:
                return message
