"""``subscriptions/listen`` from modern agents: acknowledged, tagged, ended gracefully.

A listen is a request that stays open: it is acknowledged at once with what mcpd
honours (tool-list changes here; prompts, resources and tasks through ``extra``,
see ``agents.beyond_tools.extra_methods``), every change after that is sent as a notification
carrying the subscription's id, and when the daemon stops each listen gets its
final response before the socket closes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import trio

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import RequestContext

from ..agent import Agent

# What else a listen may ask for (prompts, resources, tasks): given the connection,
# the listen's id, its filter and the request's context, the part honoured; its end.
Extra = Callable[[Agent, rpc.Id, rpc.JsonObject, RequestContext | None], dict[str, object]]
ExtraEnd = Callable[[Agent, rpc.Id], None]


class Listens:
    def __init__(self, extra: Extra | None = None, extra_end: ExtraEnd | None = None) -> None:
        self._extra = extra
        self._extra_end = extra_end
        self.ending = trio.Event()
        # Each open listen's end, and whose listen it is.
        self._ends: dict[trio.Event, Agent] = {}
        self._open = 0
        self._all_done = trio.Event()
        self._all_done.set()

    async def listen(
        self, conn: Agent, req: rpc.Request, ctx: RequestContext | None = None
    ) -> None:
        """Acknowledge, then hold the subscription until the daemon stops or the
        connection is ended (``end_of``); the agent ends it by cancelling the request."""
        try:
            wanted: Any = msgspec.json.decode(req.params or b"{}").get("notifications") or {}
        except (msgspec.DecodeError, AttributeError):
            raise rpc.RPCError(
                rpc.INVALID_PARAMS, "params.notifications must be an object"
            ) from None
        if not isinstance(wanted, dict):
            raise rpc.RPCError(rpc.INVALID_PARAMS, "params.notifications must be an object")
        honoured: dict[str, object] = (
            {"toolsListChanged": True} if wanted.get("toolsListChanged") else {}
        )
        tag = {mcp.KEY_SUBSCRIPTION_ID: req.id}
        if self._open == 0:
            # A new event only when none is open: ``end_all`` may be waiting on this one.
            self._all_done = trio.Event()
        self._open += 1
        end = trio.Event()
        if self.ending.is_set():
            end.set()
        self._ends[end] = conn
        try:
            if self._extra is not None:
                honoured.update(self._extra(conn, req.id, wanted, ctx))
            await conn.send(
                rpc.encode_notification(
                    "notifications/subscriptions/acknowledged",
                    {"_meta": tag, "notifications": honoured},
                )
            )
            # Tool-list changes go only to listens that asked for them.
            if honoured.get("toolsListChanged"):
                conn.subscriptions.add(req.id)
            await end.wait()
            # The graceful end: the final response, written before the daemon lets go.
            await conn.send(
                rpc.encode_result(req.id, {"resultType": mcp.COMPLETE, "_meta": tag}), req.id
            )
            with trio.move_on_after(1):
                await conn.drain()
        finally:
            del self._ends[end]
            conn.subscriptions.discard(req.id)
            if self._extra_end is not None:
                self._extra_end(conn, req.id)
            self._open -= 1
            if self._open == 0:
                self._all_done.set()

    async def end_all(self) -> None:
        """Close every agent's subscription with its final response before stopping."""
        self.ending.set()
        for end in self._ends:
            end.set()
        with trio.move_on_after(2):
            await self._all_done.wait()

    def end_of(self, conn: Agent) -> None:
        """Close ``conn``'s subscriptions with their final responses."""
        for end, whose in self._ends.items():
            if whose is conn:
                end.set()
