"""The tasks extension (``io.modelcontextprotocol/tasks``) through mcpd.

A server may answer a tools/call of an agent that declared the extension with a task
handle (``resultType: "task"``) instead of the result. mcpd notes which server the
task is on and which agent created it, and hands the task to the agent under an id of
its own, ``ALIAS:ID`` (the server's alias, then the id the server gave it): servers
number their tasks as they like, and two of them (or one that picks another's ids on
purpose) may give one agent the same id. ``tasks/get``, ``tasks/update`` and
``tasks/cancel`` are routed by that id to the task's server, under the server's own
id, for that agent only: to any other agent a task id is unknown, as it is to the
server for an id it never issued. Task status notifications (``notifications/tasks``)
come on the agents' own ``subscriptions/listen`` for the task ids they name, and reach
those listens only (``watches``). Whatever comes back names the task by the agent's
id, and the tool's result a task ended with is shaped as the same result of a
tools/call is (``results.result_for``), for the agent's profile as it is now: cut to
the budget, its resultType checked, an ``input_required`` the agent cannot answer told
in mcpd's words, its URIs handed over.

A task is its server's session's (``servers.calling.calls.SessionMark``): a server started
again (killed, crashed, stopped when idle, restarted by a reload) knows none of the
tasks before, and may number new ones, another agent's, as it numbered those. Once
that session ended, or once the agent's profile no longer shows the server (a reload,
a change of profile), mcpd asks the server nothing more about the task: the task ends
for its agent with a result of mcpd's saying why, which ``tasks/get``, ``tasks/update``
and ``tasks/cancel`` answer from then on, and its listens are told.

The agent is its connection, its legacy HTTP session, or for a stateless HTTP client,
which has neither, its ``StatelessAgent`` (its user, where it came in, its profile, the
server whose process it is): an agent that connects again does not see its earlier
tasks, nor does a stateless client on another profile's socket. So a connection's or a
session's tasks are forgotten as it ends; a stateless client's are kept, as many and
as large in all as the bounds below allow. A task id past ``MAX_TASK_ID``, or one that
is not a string, is the server's fault: its call fails, naming why, and nothing of it
is kept.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec import Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.mcp.serving import RequestContext

from ...config.tables.model import DaemonConfig
from ...registry.uris.scheme import Sight
from ...servers.all_servers import AllServers
from ...servers.shared import MAX_TASK_ID, AgentKey, CallRefused, Outage, SessionMark, Whose
from ..agent import Sent
from ..calls.result_bounds import error_object_within, error_within
from ..calls.results import Recipient, result_for
from ..calls.rewrite import tool_result
from ..entry.peers import owners_uid
from ..entry.shares import Holdings, count_shares
from .task import Task, TaskKey, agent_task_id, ended_task, stop_holding, task_key
from .told import ResultFor, TaskState, cut_message, malformed, task_state

# Remembered at once, in count and in the bytes of their ids, shared out by user as the
# places are (``entry.shares``). Past one user's share, or all's, the oldest task of the
# agent holding the most of the user holding the most (the newcomer's own, past its
# share) is forgotten: one user making tasks without end, on as many connections as it
# may hold, forgets its own, not everyone's.
MAX_TASKS: Final = 10_000
MAX_TASK_BYTES: Final = 1 << 20
_encode: Final = msgspec.json.Encoder().encode


class Tasks:
    def __init__(
        self,
        servers: AllServers,
        budget: Callable[[], int],
        settings: Callable[[], DaemonConfig],
    ) -> None:
        """``budget``: the result budget now; ``settings``: the daemon's, which set one
        user's share of the tasks remembered."""
        self.servers = servers
        self._budget = budget
        self._settings = settings
        # By agent, then the agent's id for the task, oldest first: one agent's task
        # must never be found for another.
        self._tasks: dict[object, OrderedDict[TaskKey, Task]] = {}
        # What each user, and each of its agents, holds: tasks and their ids' bytes.
        self._counted: Holdings[AgentKey] = Holdings()
        self._sized: Holdings[AgentKey] = Holdings()

    def __len__(self) -> int:
        """How many tasks are remembered."""
        return self._counted.total

    def finish(
        self,
        to: Recipient,
        result: Raw | dict[str, object],
        links: bool,
        sent: Sent | None = None,
        whose: Whose | None = None,
    ) -> Raw | dict[str, object] | Outage:
        """The last step of a tool's result on its way to ``to`` (``results.Finish``):
        its resource links in agents' terms (``links``: it holds some), and a task handle
        in it recorded, named by the agent's id for it, with what its call was ``sent``
        under, ``whose`` (None: as its agent's tasks before, else mcpd's own user's);
        or why the call failed after all."""
        if links:
            try:
                result = tool_result(result, self.servers.links(to.alias, to.sight))
            except msgspec.DecodeError as exc:
                return Outage(to.alias, "malformed", f"its result could not be read: {exc}")
        if to.tasks:
            caps = to.capabilities
            return self.record(
                to.alias, to.owner, result, to.session, sent, caps, to.sight, whose=whose
            )
        return result

    def record(
        self,
        alias: str,
        owner: AgentKey,
        result: Raw | dict[str, object],
        session: SessionMark | None = None,
        sent: Sent | None = None,
        capabilities: rpc.JsonObject | None = None,
        sight: Sight | None = None,
        *,
        whose: Whose | None = None,
    ) -> Raw | dict[str, object] | Outage:
        """Note a task handle a server returned to ``owner`` in the session ``session``
        for a call sent under ``sent``; the result as the agent (of the profile ``sight``,
        with the call's ``capabilities``) gets it, naming the task by the agent's id,
        or why the call failed instead."""
        try:
            head = rpc.decode_as(
                result if isinstance(result, Raw) else _encode(result), features.ResultHead
            )
        except rpc.InvalidParams:
            return result
        server_id = head.taskId
        if head.kind != features.TASK:
            return result
        if not isinstance(server_id, str):
            # Handed on as it is, no request could name the task (the agent's id for
            # it is a string), and the server's own id would reach the agent.
            reason = "the server's task handle has no taskId that is a string"
            return malformed(alias, "tools/call", reason)
        size = len(server_id) if server_id.isascii() else len(server_id.encode())
        if size > MAX_TASK_ID:
            reason = f"the server named its task with an id of {size} bytes, past the "
            return malformed(alias, "tools/call", reason + f"{MAX_TASK_ID} mcpd keeps")
        handle: dict[str, Any] = (
            msgspec.json.decode(result) if isinstance(result, Raw) else dict(result)
        )
        state = task_state(handle)
        if isinstance(state, str):
            return malformed(alias, "tools/call", state)
        key = (alias, server_id)
        uid = self._counted.user_of(owner, os.getuid()) if whose is None else whose.uid
        own = owners_uid(uid) if whose is None else whose.own
        mine = self._tasks.get(owner)
        old = None if mine is None else mine.pop(key, None)
        if old is not None:
            self._forget(owner, old)
        self._make_room(uid, own, size)
        mine = self._tasks.setdefault(owner, OrderedDict())
        task = mine[key] = Task(alias, server_id, session, size, sent)
        self._counted.take(uid, owner, 1)
        self._sized.take(uid, owner, size)
        if session is not None:
            ttl_ms, _ = mcp.ttl_of(head.ttlMs)
            session.holds.made(server_id, ttl_ms / 1000)
        task_id = agent_task_id(alias, server_id)
        return self.shown(handle, state, task, task_id, owner, capabilities, sight)

    def _make_room(self, uid: int | None, own: bool, size: int) -> None:
        """Forgets tasks, each the oldest of its agent, until one more of ``size`` bytes
        of the user ``uid`` (``own``: mcpd's own or root) fits its share and all's."""
        d = self._settings()
        count, held = count_shares(d, MAX_TASKS), count_shares(d, MAX_TASK_BYTES)
        while True:
            owner = self._counted.to_give_up(count, uid, own, 1)
            if owner is None:
                owner = self._sized.to_give_up(held, uid, own, size)
            if owner is None:
                return
            tasks = self._tasks[owner]
            self._forget(owner, tasks.popitem(last=False)[1])
            if not tasks:
                del self._tasks[owner]

    def _forget(self, owner: AgentKey, task: Task) -> None:
        stop_holding(task)
        self._counted.give(owner, 1)
        self._sized.give(owner, task.size)

    def owner_gone(self, owner: AgentKey) -> None:
        """The agent's connection or session ended: no one can name its tasks again."""
        for task in self._tasks.pop(owner, {}).values():
            self._forget(owner, task)

    def owned(self, task_id: str, owner: AgentKey) -> str | None:
        """The server of ``owner``'s task ``task_id`` (the agent's id), or None."""
        task = self.find(task_id, owner)
        return task.alias if task is not None else None

    def find(self, task_id: str, owner: AgentKey) -> Task | None:
        """``owner``'s task ``task_id`` (the agent's id), or None."""
        mine = self._tasks.get(owner)
        key = task_key(task_id)
        return None if mine is None or key is None else mine.get(key)

    def out_of_reach(self, task: Task, sight: Sight | None) -> mcp.CallToolResult | None:
        """mcpd's result ``task`` ended with once it is past its server's reach, for its
        agent of the profile ``sight`` now (None: every server's): its session with the
        server ended, or the profile no longer shows the server; it stays so. None
        while the server may be asked about it."""
        if not task.reachable:
            return task.ended
        alias = task.alias
        if task.session is not self.servers.session_of(alias):
            why = "session"
            text = (
                f"mcpd's session with the tool server '{alias}' ended after this task "
                "began (the server stopped, was restarted, or was reloaded): the task went "
                "with it, and its result will never come. Call the tool again to run it anew."
            )
        elif sight is not None and not sight.has_server(alias):
            why = "profile"
            text = (
                f"The tool server '{alias}' is not in this agent's profile any more (a "
                "reload or a change of profile took it out): mcpd passes nothing about its "
                "tasks on, and this task's result will not come through mcpd."
            )
        else:
            return None
        task.reachable = False
        stop_holding(task)
        task.ended = mcp.text_result(
            text, is_error=True, meta={"mcpd/task": {"server": alias, "ended": why}}
        )
        return task.ended

    def heard(self, task: Task, status: str | UnsetType) -> None:
        """Its server said ``task`` is in ``status`` now (UNSET: it said no status)."""
        if status in features.TASK_ENDED:
            stop_holding(task)
        elif task.session is not None:
            task.session.holds.runs(task.server_id)

    def sent_under(self, task_id: str, owner: AgentKey) -> Sent | None:
        """What ``owner``'s task ``task_id`` went to its server under (None: an unknown
        task, one ended already, or one no rule was asked about)."""
        task = self.find(task_id, owner)
        return None if task is None or task.ended is not None else task.sent

    def went_on(self, task_id: str, owner: AgentKey, sent: Sent) -> None:
        """``owner``'s task ``task_id`` goes on at its server under ``sent`` now."""
        task = self.find(task_id, owner)
        if task is not None:
            task.sent = sent

    def end(self, task_id: str, owner: AgentKey, refusal: mcp.CallToolResult) -> dict[str, object]:
        """``owner``'s task ``task_id`` ended for its agent with mcpd's ``refusal`` of
        what would have made its server go on: the task as the agent reads it now."""
        task = self.find(task_id, owner)
        if task is not None:
            task.ended = refusal
            stop_holding(task)
        return ended_task(task_id, refusal)

    def reach(
        self, task_id: str, owner: AgentKey, sight: Sight | None, method: str
    ) -> Task | dict[str, object]:
        """``owner``'s task ``task_id`` when ``method`` for it may go to its server,
        ``owner`` of the profile ``sight`` now; else the task as its agent reads it,
        ended by mcpd. Raises for a task ``owner`` has none of by that id."""
        task = self.find(task_id, owner)
        if task is None:
            raise rpc.RPCError(rpc.INVALID_PARAMS, f"Unknown task {task_id!r}")
        ended = self.out_of_reach(task, sight)
        if ended is None and method != "tasks/cancel":
            # Its server still waits for answers mcpd will not send: what it says of
            # the task is not what became of it.
            ended = task.ended
        return task if ended is None else ended_task(task_id, ended)

    async def handle(
        self,
        method: str,
        params: features.TaskParams,
        ctx: RequestContext | None,
        owner: AgentKey,
        sight: Sight | None = None,
        *,
        own_user: bool = False,
        whose: Whose | None = None,
    ) -> dict[str, object]:
        """``method`` for ``owner``'s task, at its server, for ``owner`` of the profile
        ``sight`` now (None: every server's); ``own_user``: the agent is the daemon's
        own user's or root's (``Outage.for_agent``); ``whose``: whose shares of the bytes
        under way the request is weighed against."""
        task = self.reach(params.taskId, owner, sight, method)
        if not isinstance(task, Task):
            return task
        caps = ctx.capabilities if ctx is not None and ctx.era == "modern" else None
        upstream = msgspec.structs.replace(params, taskId=task.server_id)
        try:
            raw = await self.servers.request(
                task.alias,
                method,
                upstream,
                name=task.server_id,
                capabilities=caps,
                whose=whose,
                session=task.session,
            )
        except CallRefused as refused:
            ended = self.out_of_reach(task, sight)  # its session ended meanwhile
            if ended is not None:
                return ended_task(params.taskId, ended)
            o = refused.outage.for_agent(own_user)
            raise rpc.RPCError(-32000, o.sentence(), {"mcpd/outage": o.meta()}) from None
        except rpc.RPCError as exc:  # the server's, held to the budget as a call's error is
            raise error_within(exc, self._budget()) from None
        decoded = msgspec.json.decode(raw)
        if method == "tasks/cancel":
            stop_holding(task)  # its agent gave it up: no one waits for its result
        state = task_state(decoded) if isinstance(decoded, dict) else "its answer is no object"
        if isinstance(state, str):
            o = malformed(task.alias, method, state)
            raise rpc.RPCError(-32000, o.sentence(), {"mcpd/outage": o.meta()})
        if method != "tasks/cancel":
            self.heard(task, state.status)
        return self.shown(decoded, state, task, params.taskId, owner, caps, sight)

    def shown(
        self,
        told: dict[str, object],
        state: TaskState,
        task: Task,
        task_id: str,
        owner: AgentKey,
        capabilities: rpc.JsonObject | None,
        sight: Sight | None,
    ) -> dict[str, object]:
        """``told``, what ``task``'s server told of it (``state`` as read of it: a handle,
        an answer to a tasks/* request, news), as it reaches ``owner`` (of the profile
        ``sight`` now, with ``capabilities``): naming the task ``task_id``, its status
        message cut, the result it ended with as a tools/call's would be, the error it
        failed with held to the budget as a call's error is. Every way a task reaches
        an agent comes through here, so no way misses a step."""
        if "taskId" in told:
            told["taskId"] = task_id
        cut_message(told, state)
        failed = told.get("error")
        if isinstance(failed, dict):
            told["error"] = error_object_within(failed, self._budget())
        if "result" in told:
            to = ResultFor(task.alias, owner, sight, capabilities, task.session)
            shaped, _ = result_for(Raw(_encode(told["result"])), to, self._budget(), self.finish)
            if isinstance(shaped, Outage):
                own = shaped.result()
                own.resultType = mcp.COMPLETE
                shaped = msgspec.to_builtins(own)
            told["result"] = shaped
        return told
