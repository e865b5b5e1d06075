"""`mcpd bridge` as a host runs it: a child process spoken to over its stdio."""

from __future__ import annotations

import json
from typing import Any

import trio


class BridgeProcess:
    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.buf = b""

    async def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.send_all(json.dumps(msg).encode() + b"\n")

    async def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while b"\n" not in self.buf:
            chunk = await self.proc.stdout.receive_some(65536)
            assert chunk, "the bridge closed its stdout"
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)  # type: ignore[no-any-return]

    async def ask(
        self, rid: int, method: str, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        while True:
            reply = await self.receive()
            if reply.get("id") == rid:
                return reply
