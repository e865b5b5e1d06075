"""The agent's end of a connection to mcpd, as a test drives it: messages written one
a line, and mcpd's lines read back one at a time."""

from __future__ import annotations

import json
from typing import Any

import trio


class LineEnd:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self._buf = b""

    async def send(self, *msgs: Any) -> None:
        """Each message on a line of its own (bytes as they are), in one write."""
        lines = [m if isinstance(m, bytes) else json.dumps(m).encode() for m in msgs]
        await self.stream.send_all(b"".join(line + b"\n" for line in lines))

    async def line(self) -> Any:
        while b"\n" not in self._buf:
            data = await self.stream.receive_some(1 << 16)
            assert data, "the connection ended"
            self._buf += data
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)
