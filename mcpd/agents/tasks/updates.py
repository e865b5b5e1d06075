"""A task's answers, looked at before they reach its server.

A ``tasks/update`` is what makes a task waiting for input go on: the server acts on
the call that made the task with what the agent answered, which may be long after that
call was let through. So it meets the look a call sent again with its agent's answers
meets (``CallPolicy.again``), against the tool and decision the call went out under
(``table.Tasks.sent_under``): its tool as the agent's profile lists it now (gone, held,
or defined anew: refused), then the rules now (``deny`` or a rule's rate: refused; the
same decision lets it go, an approval it had standing; another rule's ``ask`` waits for
the operator, since this request cannot carry a question to the agent). Refused, the
answers are not sent, the task ends for its agent with mcpd's refusal as its result
(``tasks/get`` says the same from then on), and the audit log records the call refused.

``tasks/get`` and ``tasks/cancel`` make the server do nothing the call was let through
for, and are not looked at.
"""

from __future__ import annotations

from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.mcp import features
from protocol.mcp.serving import RequestContext

from ...servers.shared import AgentKey, Call, Outcome
from ..agent import NO_ONE, Agent, AgentCall, OutcomeSink, Sent
from ..calls.callpolicy import CallPolicy
from ..calls.callrecords import CallRecords, outcome_of
from .table import Tasks


class _Unanswered(OutcomeSink):
    """Where the outcome of a call that stands for a task's answers goes: nowhere,
    since the answers go to the server as the task's, not as a call."""

    def finish(self, call: AgentCall, outcome: Outcome) -> None:
        pass


_UNANSWERED = _Unanswered()


class TaskUpdates:
    def __init__(self, tasks: Tasks, policy: CallPolicy, records: CallRecords) -> None:
        self._tasks = tasks
        self._policy = policy
        self._records = records

    async def refusal(
        self,
        agent: Agent,
        request: rpc.Request,
        params: features.TaskParams,
        ctx: RequestContext,
        owner: AgentKey,
    ) -> dict[str, object] | None:
        """None when ``params`` (of ``owner``'s ``tasks/update``) may go to the task's
        server; else the task as its agent reads it, ended with mcpd's refusal."""
        sent = self._tasks.sent_under(params.taskId, owner)
        if sent is None:
            return None
        call = _standing_for(agent, request, params, ctx, sent)
        call.arrived = self._records.now()
        who = agent.identity.info(call.profile, True)
        going = await self._policy.again(call, who, agent.kin, sent, None)
        if isinstance(going, Sent):
            self._tasks.went_on(params.taskId, owner, going)
            return None
        self._records.tool_call(call, who, *outcome_of(going))
        return self._tasks.end(params.taskId, owner, going)


def _standing_for(
    agent: Agent,
    request: rpc.Request,
    params: features.TaskParams,
    ctx: RequestContext,
    sent: Sent,
) -> AgentCall:
    """The call a task's answers make its server go on with, as the rules and the audit
    log see it: its tool, in the profile it was made in, under the decision it went out
    under. What a person asked about it would be shown is the answers, which are what
    the server acts on now."""
    entry = sent.entry
    answers = params.inputResponses
    out = Call(
        request.id,
        entry.local,
        answers if isinstance(answers, Raw) else Raw(b"{}"),
        NO_ONE,
        ctx,
        owner=agent.owner,
        alias=entry.alias,
        original=entry.original,
    )
    return AgentCall(
        out,
        agent,
        _UNANSWERED,
        modern=True,
        profile=sent.profile.name,
        known=True,
        # A person approved it under an ``ask``: the rule is what stands now.
        decision="approved" if sent.decision.action == "ask" else sent.decision.action,
        decided_by=sent.decision.by,
    )
