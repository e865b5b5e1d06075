"""``subscriptions/listen`` from modern agents: acknowledged, tagged, ended gracefully.

A listen is a request that stays open: it is acknowledged at once with what mcpd
honours (tool-list changes), every change after that is sent as a notification
carrying the subscription's id, and when the daemon stops each listen gets its
final response before the socket closes.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec
import trio

from protocol import jsonrpc as rpc
from protocol import mcp


class Listener(Protocol):
    subscriptions: set[rpc.Id]

    async def send(self, data: bytes, rid: rpc.Id | None = None) -> None: ...

    async def drain(self) -> None: ...


class Listens:
    def __init__(self) -> None:
        self.ending = trio.Event()
        self._open = 0
        self._all_done = trio.Event()
        self._all_done.set()

    async def listen(self, conn: Listener, req: rpc.Request) -> None:
        """Acknowledge, then hold the subscription until the daemon stops (the agent
        ends it by cancelling the request)."""
        try:
            wanted: Any = msgspec.json.decode(req.params or b"{}").get("notifications") or {}
        except (msgspec.DecodeError, AttributeError):
            raise rpc.RPCError(
                rpc.INVALID_PARAMS, "params.notifications must be an object"
            ) from None
        honoured = {"toolsListChanged": True} if wanted.get("toolsListChanged") else {}
        tag = {mcp.KEY_SUBSCRIPTION_ID: req.id}
        await conn.send(
            rpc.encode_notification(
                "notifications/subscriptions/acknowledged",
                {"_meta": tag, "notifications": honoured},
            )
        )
        if honoured:
            conn.subscriptions.add(req.id)
        self._open += 1
        self._all_done = trio.Event()
        try:
            await self.ending.wait()
            # The graceful end: the final response, written before the daemon lets go.
            await conn.send(
                rpc.encode_result(req.id, {"resultType": mcp.COMPLETE, "_meta": tag}), req.id
            )
            with trio.move_on_after(1):
                await conn.drain()
        finally:
            conn.subscriptions.discard(req.id)
            self._open -= 1
            if self._open == 0:
                self._all_done.set()

    async def end_all(self) -> None:
        """Close every agent's subscription with its final response before stopping."""
        self.ending.set()
        with trio.move_on_after(2):
            await self._all_done.wait()
