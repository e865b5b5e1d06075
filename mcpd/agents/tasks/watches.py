"""Task status notifications (``notifications/tasks``) on agents' own listens.

A ``subscriptions/listen`` naming task ids watches those of them that are its agent's
own tasks (``table.Tasks``); mcpd's one listen at each server names every task agents
watch there, once whatever the number of listens. What a server tells of a task
reaches the listens that watch it, naming it by the agent's id, its result shaped for
the listen's agent as its profile is now. A watch lasts as long as its task is in
reach: when the server's session it was made in ends, each listen watching it is told
the task as ``tasks/get`` now shows it (ended by mcpd, saying why) and lets go of it,
so that nothing a server started again tells under the same id reaches it; likewise a
task whose server the agent's profile no longer shows, once that server tells of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

from ...registry.uris.scheme import Sight
from ...servers.all_servers import AllServers
from ...servers.shared import AgentKey, SessionMark
from .table import Tasks
from .task import Task, agent_task_id, ended_task
from .told import news_dropped, task_state

# Where a listen is: its connection's id, and the listen's request id.
Where = tuple[int, rpc.Id]


class _Watch:
    """A listen naming tasks: its agent, the tasks it watches by the agent's ids, its
    sender, the capabilities it was sent with (which the results in its news are shaped
    for), and its agent's profile as it is each time it is asked (None: every server's)."""

    __slots__ = ("capabilities", "owner", "send", "sight", "tasks")

    def __init__(
        self,
        owner: AgentKey,
        tasks: dict[str, Task],
        send: Callable[[bytes], None],
        capabilities: rpc.JsonObject | None,
        sight: Callable[[], Sight | None],
    ) -> None:
        self.owner = owner
        self.tasks = tasks
        self.send = send
        self.capabilities = capabilities
        self.sight = sight


class TaskWatches:
    def __init__(self, tasks: Tasks, servers: AllServers) -> None:
        self._tasks = tasks
        self._servers = servers
        self._watches: dict[Where, _Watch] = {}
        servers.on_task_news(self._news)
        servers.on_session_end(self._session_ended)

    def watch(
        self,
        owner: AgentKey,
        where: Where,
        wanted: object,
        send: Callable[[bytes], None],
        capabilities: rpc.JsonObject | None = None,
        sight: Callable[[], Sight | None] = lambda: None,
    ) -> list[str]:
        """A listen's ``taskIds``: those of the agent's own tasks its server may still
        be asked about are honoured. ``capabilities``: the listen's, for the results its
        news carries; ``sight``: the agent's profile now, each time it is asked."""
        ids = [t for t in wanted if isinstance(t, str)] if isinstance(wanted, list) else []
        now = sight()
        mine = {
            t: task
            for t in ids
            if (task := self._tasks.find(t, owner)) is not None
            and self._tasks.out_of_reach(task, now) is None
        }
        if mine:
            self._watches[where] = _Watch(owner, mine, send, capabilities, sight)
            for task in mine.values():
                self._servers.watch_task(task.alias, task.server_id, True)
        return list(mine)

    def unwatch(self, where: Where) -> None:
        watched = self._watches.pop(where, None)
        if watched is not None:
            for task_id, task in watched.tasks.items():
                self._let_go(task_id, task)

    def _let_go(self, task_id: str, task: Task) -> None:
        """No listen of ``task``'s own watches it any more: its server is told so, unless
        another watches the same task of the server's (an agent's id names one server's
        task, whoever's agent holds it)."""
        for watch in self._watches.values():
            if watch.tasks.get(task_id) is not None:
                return
        self._servers.watch_task(task.alias, task.server_id, False)

    def _news(self, alias: str, params: Raw) -> None:
        try:
            data = msgspec.json.decode(params)
        except msgspec.DecodeError:
            return
        server_id = data.get("taskId") if isinstance(data, dict) else None
        if not isinstance(server_id, str):
            return
        state = task_state(data)
        if isinstance(state, str):
            news_dropped(alias, state)
            return
        task_id = agent_task_id(alias, server_id)
        session = self._servers.session_of(alias)
        for (_, listen_id), watch in list(self._watches.items()):
            task = watch.tasks.get(task_id)
            if task is None or task.session is not session:
                continue  # another agent's, the same id at another server, or in another session
            sight = watch.sight()
            ended = self._tasks.out_of_reach(task, sight)
            if ended is not None:
                self._tell(watch, listen_id, ended_task(task_id, ended))
                del watch.tasks[task_id]
                self._let_go(task_id, task)
                continue
            self._tasks.heard(task, state.status)
            caps = watch.capabilities
            news = self._tasks.shown(dict(data), state, task, task_id, watch.owner, caps, sight)
            self._tell(watch, listen_id, news)

    def _session_ended(self, alias: str, mark: SessionMark) -> None:
        """Each listen watching a task of that session is told it ended, and lets go of
        it (the server's watches were the session's, and went with it)."""
        for (_, listen_id), watch in self._watches.items():
            gone = [
                (task_id, task)
                for task_id, task in watch.tasks.items()
                if task.alias == alias and task.session is mark
            ]
            for task_id, task in gone:
                del watch.tasks[task_id]
                ended = self._tasks.out_of_reach(task, watch.sight())
                if ended is not None:
                    self._tell(watch, listen_id, ended_task(task_id, ended))

    @staticmethod
    def _tell(watch: _Watch, listen_id: rpc.Id, news: dict[str, Any]) -> None:
        meta = dict(news.get("_meta") or {})
        meta[mcp.KEY_SUBSCRIPTION_ID] = listen_id
        watch.send(rpc.encode_notification("notifications/tasks", {**news, "_meta": meta}))
