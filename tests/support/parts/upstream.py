"""An upstream session to the scripted stdio server over a real transport, and shapes of
reply no server may send."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import trio

from mcpd.servers.connected.upstream import Upstream
from tests.support.system.procs import scripted
from transports.stdio.params import StdioParams
from transports.stdio.transport import StdioTransport, open_stdio_transport


class StderrWatch:
    """Collects a server's stderr lines; ``wait_for`` returns the first matching one."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._changed = trio.Event()

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        self._changed.set()

    async def wait_for(self, predicate: Callable[[str], bool]) -> str:
        while True:
            for line in self.lines:
                if predicate(line):
                    return line
            self._changed = trio.Event()
            await self._changed.wait()


class Server:
    def __init__(self, transport: StdioTransport, log: Path, stderr: StderrWatch) -> None:
        self.transport = transport
        self.log = log
        self.stderr = stderr

    def received(self) -> list[dict[str, Any]]:
        """Every message the server has read so far, in order."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_bytes().splitlines()]

    def raw_lines(self) -> list[bytes]:
        return self.log.read_bytes().splitlines() if self.log.exists() else []

    def methods(self) -> list[str]:
        return [m.get("method", "(response)") for m in self.received()]

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.received() if m.get("method") == method]


@contextlib.asynccontextmanager
async def scripted_server(log: Path, *flags: str) -> AsyncIterator[Server]:
    command, args = scripted("--log-file", str(log), *flags)
    stderr = StderrWatch()
    async with open_stdio_transport(
        "scripted", StdioParams(command=command, args=args), on_stderr=stderr
    ) as transport:
        yield Server(transport, log, stderr)


def upstream(server: Server, **kw: Any) -> Upstream:
    return Upstream("scripted", server.transport, **kw)


BAD_SHAPES = [
    {"name": "array_schema", "inputSchema": [1, 2]},
    {"name": "string_schema", "inputSchema": "object"},
    {"name": "null_schema", "inputSchema": None},
    {"name": "list_type", "inputSchema": {"type": "array"}},
    {"name": "untyped", "inputSchema": {"properties": {"q": {"type": "string"}}}},
    {"name": "empty", "inputSchema": {}},
    {"name": "odd_fields", "inputSchema": {"type": "object"}, "outputSchema": "nope", "icons": "x"},
    {"name": "tool0", "description": "a second tool0", "inputSchema": {"type": "object"}},
]
