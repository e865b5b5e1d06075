"""`mcpd serve` run as systemd runs it (`--log stderr`, a notify socket of the test's),
with its log read as it comes, and an agent on its socket that speaks raw lines: for
tests of what a user sees of a running daemon, without systemd."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.support.daemons.notify import Notifications

ROOT = Path(__file__).resolve().parents[3]
LOG = ("--log", "stderr")


class Served:
    """`mcpd serve --log stderr` on a config file, its notify socket, and its log read
    line by line as it comes."""

    def __init__(self, directory: Path, config: str) -> None:
        self.socket = directory / "mcpd.sock"
        self.config = directory / "config.toml"
        self.config.write_text(config)
        self.notify = Notifications(directory / "notify")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpd", "serve", "--config", str(self.config), *LOG],
            env={**os.environ, "PYTHONPATH": str(ROOT), "NOTIFY_SOCKET": self.notify.path},
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.log: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def until(self, text: str) -> None:
        """Once the log has a line with ``text``."""
        while True:
            line = self.lines.get(timeout=60)
            if line is None:
                raise AssertionError(f"mcpd exited before logging {text!r}: {self.log}")
            self.log.append(line)
            if text in line:
                return

    def exited(self) -> int:
        """Its exit status, once it exits; the rest of its log is read."""
        try:
            status = self.proc.wait(timeout=60)
        finally:
            self.proc.kill()
        while (line := self.lines.get(timeout=60)) is not None:
            self.log.append(line)
        return status

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.notify.sock.close()


class Agent:
    """An agent on mcpd's socket, speaking raw lines."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("rwb")
        params = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "agent", "version": "1"},
        }
        self.send({"id": 0, "method": "initialize", "params": params})
        assert "result" in self.receive()
        self.send({"method": "notifications/initialized"})

    def send(self, msg: dict[str, Any]) -> None:
        self.file.write(json.dumps({"jsonrpc": "2.0", **msg}).encode() + b"\n")
        self.file.flush()

    def call(self, rid: int, tool: str) -> None:
        self.send({"id": rid, "method": "tools/call", "params": {"name": tool, "arguments": {}}})

    def receive(self) -> dict[str, Any]:
        line = self.file.readline()
        assert line, "EOF"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def until_eof(self) -> list[dict[str, Any]]:
        """Every message until mcpd closes the connection."""
        got = []
        while line := self.file.readline():
            got.append(json.loads(line))
        return got

    def close(self) -> None:
        self.file.close()
        self.sock.close()
