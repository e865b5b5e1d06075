"""The tasks extension (``io.modelcontextprotocol/tasks``) through mcpd.

A server may answer a tools/call of an agent that declared the extension with a task
handle (``resultType: "task"``) instead of the result. mcpd notes which server the
task is on and which agent created it; ``tasks/get``, ``tasks/update`` and
``tasks/cancel`` are routed by task id to that server, for that agent only: to any
other agent a task id is unknown, as it is to the server for an id it never issued.
Each agent's tasks are its own table, so that the same id issued by two servers (or by
a server that picks another's on purpose) never makes one agent's task another's.
Task status notifications (``notifications/tasks``) come on the agents' own
``subscriptions/listen`` for the task ids they name, and reach those listens only.

The agent is its connection (for a stateless HTTP client, which has none, its user):
an agent that connects again does not see its earlier tasks.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec import Raw

from protocol import jsonrpc as rpc
from protocol import mcp, surface
from protocol.server import RequestContext

from ..registry.scheme import Sight
from ..servers.all_servers import AllServers
from ..servers.calls import CallRefused
from .rewrite import tool_result

# Remembered at once. Past it, the oldest task of the agent that holds the most is
# forgotten: one agent making tasks without end forgets its own, not everyone's.
MAX_TASKS: Final = 10_000
_encode: Final = msgspec.json.Encoder().encode


class _Task:
    __slots__ = ("alias", "sight")

    def __init__(self, alias: str, sight: Sight | None) -> None:
        self.alias = alias
        self.sight = sight  # the profile of the agent whose call made it


class Tasks:
    def __init__(self, servers: AllServers) -> None:
        self.servers = servers
        # By agent, then task id, oldest first: two servers may issue the same id, and
        # one agent's task must never be found for another.
        self._tasks: dict[object, OrderedDict[str, _Task]] = {}
        self._count = 0
        # (connection, listen id) -> (its owner, the task ids it watches, its sender)
        self._watches: dict[
            tuple[int, rpc.Id], tuple[object, set[str], Callable[[bytes], None]]
        ] = {}
        servers.on_task_news(self._news)

    def record(
        self, alias: str, owner: object, result: Raw | dict[str, Any], sight: Sight | None = None
    ) -> None:
        """Note a task handle a server returned to ``owner`` (of the profile ``sight``)."""
        try:
            head = rpc.decode_as(
                result if isinstance(result, Raw) else _encode(result), surface.ResultHead
            )
        except rpc.InvalidParams:
            return
        if head.kind == surface.TASK and isinstance(head.taskId, str):
            mine = self._tasks.setdefault(owner, OrderedDict())
            if head.taskId not in mine:
                self._count += 1
            mine[head.taskId] = _Task(alias, sight)
            mine.move_to_end(head.taskId)
            if self._count > MAX_TASKS:
                self._forget_one()

    def _forget_one(self) -> None:
        most = max(self._tasks, key=lambda owner: len(self._tasks[owner]))
        held = self._tasks[most]
        held.popitem(last=False)
        self._count -= 1
        if not held:
            del self._tasks[most]

    def owned(self, task_id: str, owner: object) -> str | None:
        task = self._owned(task_id, owner)
        return task.alias if task is not None else None

    def _owned(self, task_id: str, owner: object) -> _Task | None:
        mine = self._tasks.get(owner)
        return None if mine is None else mine.get(task_id)

    async def handle(
        self, method: str, params: surface.TaskParams, ctx: RequestContext | None, owner: object
    ) -> Any:
        task = self._owned(params.taskId, owner)
        if task is None:
            raise rpc.RPCError(rpc.INVALID_PARAMS, f"Unknown task {params.taskId!r}")
        alias = task.alias
        caps = ctx.capabilities if ctx is not None and ctx.era == "modern" else None
        try:
            raw = await self.servers.request(
                alias, method, params, name=params.taskId, capabilities=caps
            )
        except CallRefused as refused:
            o = refused.outage
            raise rpc.RPCError(-32000, o.sentence(), {"mcpd/outage": o.meta()}) from None
        if method != "tasks/get":
            return raw
        # A finished task carries the tool's result: its URIs are handed over as a
        # tools/call result's would be.
        decoded = msgspec.json.decode(raw)
        if isinstance(decoded, dict) and isinstance(decoded.get("result"), dict):
            decoded["result"] = tool_result(
                decoded["result"], self.servers.links(alias, task.sight)
            )
            return decoded
        return raw

    # -- status notifications --

    def watch(
        self,
        owner: object,
        where: tuple[int, rpc.Id],
        wanted: Any,
        send: Callable[[bytes], None],
    ) -> list[str]:
        """A listen's ``taskIds``: those of the agent's own tasks are honoured."""
        ids = [t for t in wanted if isinstance(t, str)] if isinstance(wanted, list) else []
        mine = {t: task for t in ids if (task := self._owned(t, owner)) is not None}
        if mine:
            self._watches[where] = (owner, set(mine), send)
            for task_id, task in mine.items():
                self.servers.watch_task(task.alias, task_id, True)
        return list(mine)

    def unwatch(self, where: tuple[int, rpc.Id]) -> None:
        watched = self._watches.pop(where, None)
        if watched is None:
            return
        still = {t for _, ids, _ in self._watches.values() for t in ids}
        for task_id in watched[1] - still:
            task = self._owned(task_id, watched[0])
            if task is not None:
                self.servers.watch_task(task.alias, task_id, False)

    def _news(self, alias: str, params: Raw) -> None:
        try:
            data = msgspec.json.decode(params)
        except msgspec.DecodeError:
            return
        task_id = data.get("taskId") if isinstance(data, dict) else None
        if not isinstance(task_id, str):
            return
        for (_, listen_id), (owner, ids, send) in self._watches.items():
            task = self._owned(task_id, owner) if task_id in ids else None
            if task is None or task.alias != alias:
                continue  # another agent's, or the same id at another server
            news = dict(data)
            if isinstance(data.get("result"), dict):
                news["result"] = tool_result(data["result"], self.servers.links(alias, task.sight))
            meta = dict(data.get("_meta") or {})
            meta[mcp.KEY_SUBSCRIPTION_ID] = listen_id
            send(rpc.encode_notification("notifications/tasks", {**news, "_meta": meta}))
