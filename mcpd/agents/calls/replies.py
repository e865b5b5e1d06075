"""A tools/call's reply: the line its agent gets for its outcome, and the call's audit
record, made there. Both ways a call is answered make it here: the call started without
a task, when its outcome reaches its connection, and the call awaited in a task, round
by round (``askback.call_rounds``)."""

from __future__ import annotations

from typing import Any, Final

from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc import splice
from protocol.mcp import core as mcp

from ...policy.agent import AgentInfo
from ...servers.all_servers import AllServers
from ...servers.shared import Outage, Outcome
from ..agent import AgentCall, Sent
from ..askback import url_required
from ..askback.resumes import Resumes
from ..tasks.table import Tasks
from .callpolicy import CallPolicy
from .callrecords import CallRecords, ended, outcome_of
from .results import shape_call_result

# What the journal calls a result when it tells of a secret masked in it.
_A_RESULT: Final = "a tools/call result"


class CallReplies:
    """Each call's reply line and its audit record."""

    def __init__(
        self,
        servers: AllServers,
        policy: CallPolicy,
        records: CallRecords,
        resumes: Resumes,
        tasks: Tasks,
        *,
        budget: int,
    ) -> None:
        """``resumes``: where a modern agent's call whose server asked it things is
        kept for its retry; ``tasks``: where a result is finished (its links, its task
        handle)."""
        self.servers = servers
        self.policy = policy
        self.records = records
        self.resumes = resumes
        self.tasks = tasks
        self.budget = budget  # daemon.result_budget_chars; set again on each reload

    @staticmethod
    def who(call: AgentCall) -> AgentInfo:
        """The agent as ``call``'s records name it: in the profile the call was routed
        in (the connection may have switched since)."""
        return call.agent.identity.info(call.profile, call.modern)

    def failed(self, call: AgentCall, exc: BaseException) -> None:
        """``call`` raised what nothing expected on its way (a fault in mcpd): its record
        says so, unless it has one already."""
        self.records.tool_call(call, self.who(call), *ended(exc))

    def reply(
        self,
        call: AgentCall,
        outcome: Outcome,
        sent: Sent | None = None,
        rid: rpc.Id | None = None,
    ) -> tuple[bytes, bool]:
        """The reply line for ``call``'s ``outcome`` (the call last sent under ``sent``),
        and whether it was spliced around the server's result as it came (needing no
        check). Under the call's id, or ``rid``: a later request of the agent's that
        its rounds answer (``askback.driver``). The call's audit record is made here."""
        who = self.who(call)
        out = call.out
        if rid is None:
            rid = out.id
        if isinstance(outcome, rpc.RPCError):
            # A legacy server's ask to open a link, as this agent can take it.
            outcome = url_required.for_call(call, outcome)
        if isinstance(outcome, Raw):
            # ``results.shaped_for``, written out, with the head the scheduler read: every
            # call passes here (tests/mcpd/agents/calls/test_replies.py holds the two alike).
            shaped, links, failed = shape_call_result(
                outcome,
                modern=call.modern,
                budget=self.budget,
                alias=out.alias,
                capabilities=out.capabilities,
                tasks=call.tasks,
                head=out.head,
            )
            if call.modern and links and isinstance(shaped, Raw):
                # What the server asked goes to the agent with a requestState of mcpd's,
                # so that its retry is this call's next round (``resumes``). An
                # input_required an agent is handed counts as holding links: it is
                # finished, so it is looked at here.
                sent = sent or self.policy.allowed_as(call, call.agent.profile)
                shaped, failed = self.resumes.hand_on(shaped, call, who, sent)
            finished: Raw | dict[str, Any] | Outage = shaped
            if links or call.tasks:
                finished = self.tasks.finish(call, shaped, links, sent)
            if not isinstance(finished, Outage):
                line: bytes
                if isinstance(finished, Raw) and out.splice:
                    line, spliced = splice.reply(rid, finished), True
                else:
                    if not isinstance(finished, Raw):  # mcpd's bytes of it, searched anew
                        finished = self.servers.written(out.alias, finished, _A_RESULT)
                    line, spliced = rpc.encode_result(rid, finished), False
                self.records.tool_call(call, who, "tool_error" if failed else "ok", None, len(line))
                return line, spliced
            outcome = finished  # what the server returned could not be passed on
        if out.unqueued is not None:  # the servers would not let it wait: their words
            call.refusal = out.unqueued
        if isinstance(outcome, rpc.RPCError):
            line = rpc.encode_error(rid, outcome.code, outcome.message, outcome.data)
        else:
            own = (
                outcome.for_agent(call.agent.identity.reads_as_owner()).result()
                if isinstance(outcome, Outage)
                else outcome
            )
            if call.modern:
                own.resultType = mcp.COMPLETE
            line = rpc.encode_result(rid, own)
        self.records.tool_call(call, who, *outcome_of(outcome), len(line))
        return line, False
