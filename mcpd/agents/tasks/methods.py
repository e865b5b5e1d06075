"""``tasks/get``, ``tasks/update`` and ``tasks/cancel`` from agents.

Each is for a task of the agent's own (``table.Tasks``), from an agent that declared the
tasks extension on the request. The agent's profile is looked at as it is when the
request comes, not as it was when the task was made: a task whose server it no longer
shows, or whose session with its server ended, is answered by mcpd without the server.
A ``tasks/update`` is then looked at as a call sent again is (``updates``).
"""

from __future__ import annotations

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.mcp.serving import RequestContext

from ...registry.uris.scheme import Sight
from ...servers.shared import AgentKey
from ..agent import Agent
from ..calls.callpolicy import CallPolicy
from ..calls.callrecords import CallRecords
from .table import Tasks
from .updates import TaskUpdates


class TaskMethods:
    def __init__(self, tasks: Tasks) -> None:
        self.tasks = tasks
        self._updates: TaskUpdates | None = None  # see ``look_at_updates``

    def look_at_updates(self, policy: CallPolicy, records: CallRecords) -> None:
        """Have ``policy`` look at each task's answers before they reach its server,
        ``records`` keeping the audit record of those it refuses."""
        self._updates = TaskUpdates(self.tasks, policy, records)

    async def answer(
        self,
        agent: Agent,
        req: rpc.Request,
        ctx: RequestContext | None,
        owner: AgentKey,
        sight: Sight | None,
    ) -> dict[str, object]:
        """``req`` of ``agent`` (``owner`` of its tasks), whose profile is ``sight`` now
        (None: every server's)."""
        if ctx is None or ctx.era != "modern" or not features.has_tasks(ctx.capabilities):
            raise rpc.RPCError(
                rpc.MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"{req.method} needs the {features.TASKS_EXTENSION} extension",
                {"requiredCapabilities": {"extensions": {features.TASKS_EXTENSION: {}}}},
            )
        params = rpc.decode_as(req.params, features.TaskParams)
        result = self.tasks.reach(params.taskId, owner, sight, req.method)
        if isinstance(result, dict):  # ended by mcpd: its server is not asked
            result["resultType"] = mcp.COMPLETE
            return result
        if req.method == "tasks/update" and self._updates is not None:
            ended = await self._updates.refusal(agent, req, params, ctx, owner)
            if ended is not None:
                ended["resultType"] = mcp.COMPLETE
                return ended
        own_user = agent.reads_shared_output()
        result = await self.tasks.handle(
            req.method, params, ctx, owner, sight, own_user=own_user, whose=agent.whose()
        )
        if isinstance(result, dict):
            result.setdefault("resultType", mcp.COMPLETE)
        return result
