"""A Streamable HTTP server that speaks 2026-07-28 until told to turn legacy, as an
older build deployed again at the same URL does, for ``tests.support.http_servers.serving``.

Modern, it answers ``server/discover`` (tools only, a ttl of 0), ``tools/list`` and
``tools/call`` (the tool ``era`` says which era answered). After ``turn()``, or after
its first ``modern_for`` requests, it is a legacy server of one of two kinds:

- ``"sessions"``: one that wants its sessions (``LegacySession``, strict): a request
  without one is refused with 400 "No valid session ID provided", ``initialize``
  begins one;
- ``"stateless"``: one that needs none, answering ``server/discover`` with -32601 and
  every other request as a legacy server (results without ``resultType``).

``greeted`` is set once ``initialize`` has come.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import trio

from tests.support.http_servers.serving import LegacySession, Responder, SeenRequest, error, result

TOOL = {"name": "era", "inputSchema": {"type": "object"}}


class EraTurningServer:
    def __init__(
        self, legacy: Literal["sessions", "stateless"], modern_for: float = math.inf
    ) -> None:
        self.legacy = legacy
        self.modern_for = modern_for
        self.requests = 0
        self.greeted = trio.Event()
        self.discovers_refused = 0
        self._legacy = LegacySession(self._legacy_request, tools=[TOOL], strict=True)

    def turn(self) -> None:
        self.modern_for = self.requests

    async def __call__(self, req: SeenRequest, respond: Responder) -> None:
        if req.method == "POST" and req.rpc_id is not None:
            self.requests += 1
        if self.requests <= self.modern_for:
            await self._modern(req, respond)
            return
        if req.rpc_method == "initialize":
            self.greeted.set()
        if req.rpc_method == "server/discover":
            self.discovers_refused += 1
        if self.legacy == "sessions":
            await self._legacy(req, respond)
        elif req.rpc_method == "initialize":
            value = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "turned", "version": "1"},
            }
            await respond.json(result(req.rpc_id, value))
        elif req.rpc_id is None:
            await respond.reply(202)
        elif req.rpc_method == "server/discover":
            await respond.json(error(req.rpc_id, -32601, "Method not found"))
        else:
            await self._legacy_request(req, respond)

    async def _modern(self, req: SeenRequest, respond: Responder) -> None:
        if req.rpc_id is None:
            await respond.reply(202)
            return
        value: dict[str, Any] = {"resultType": "complete"}
        if req.rpc_method == "server/discover":
            value |= {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
            value |= {"ttlMs": 0}
        elif req.rpc_method == "tools/list":
            value |= {"tools": [TOOL], "ttlMs": 0}
        else:
            value |= {"content": [{"type": "text", "text": "modern"}]}
        await respond.json(result(req.rpc_id, value))

    async def _legacy_request(self, req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "tools/list":
            await respond.json(result(req.rpc_id, {"tools": [TOOL]}))
        elif req.rpc_method == "tools/call":
            await respond.json(
                result(req.rpc_id, {"content": [{"type": "text", "text": "legacy"}]})
            )
        elif req.rpc_method == "ping":
            await respond.json(result(req.rpc_id, {}))
        else:
            await respond.json(error(req.rpc_id, -32601, "Method not found"))
