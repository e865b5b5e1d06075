"""tools/call on the agent side: a call decoded into its ``AgentCall`` (which holds
the servers' ``Call``), routed by the agent's profile, and the reply for each outcome.

A call is decoded once (``Router.call_of``, from what either decoder made of the
request) and routed once (``Router.route``): through the agent's profile, whose
search mode answers its own meta-tools, to a server and the tool's name there, and
past the policy's rules (``callpolicy``). Started without a task (``Router.start``),
its one outcome comes back to it, and on to the agent's connection, which writes the
reply ``Router.reply`` makes; the reply is where the call's audit record is made
(``callrecords``). A call whose server may ask its agent things, one that waits for a
person's approval, and every call over HTTP, is awaited in a task instead
(``Router.run``): the same call, driven through the rounds of asking back
(``call_rounds``). So is a modern agent's retry that continues a
call its server answered ``input_required`` (``resumes``): it is that call's next
round.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

from msgspec import UNSET, Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc import splice
from protocol.lines.framing import DEFAULT_MAX_LINE
from protocol.mcp import core as mcp
from protocol.mcp import features as surface

from ...audit.record import NO_DECISION
from ...policy.agent import AgentInfo
from ...servers.all_servers import AllServers
from ...servers.shared import Call, Outage, Outcome
from ..agent import NO_ONE, Agent, AgentCall
from ..askback import url_required
from ..askback.call_rounds import CallRounds, Had
from ..askback.driver import AskBackDriver
from ..askback.resumes import Resumed, Resumes
from ..askback.rounds import Head
from ..lists.metatools import NAMES as META_TOOLS
from ..lists.search_mode import unwrap
from .callpolicy import Ask, CallPolicy, Sent
from .callrecords import CallRecords, ended, outcome_of, reason_kept
from .request_context import agents_own, spliced_context
from .results import Recipient, shape_call_result
from .unrouted import held_tool, unknown_tool

# The last step of a tool's result (``results.Finish``), told what its call was sent
# under: a task the result hands the agent keeps it, to look at its answers again.
SentFinish = Callable[
    [Recipient, Raw | dict[str, Any], bool, Sent | None], Raw | dict[str, Any] | Outage
]
# How arguments that are an object, or null, begin.
_OBJECT_OR_NULL: Final = (ord("{"), ord("n"))
# What the journal calls a result when it tells of a secret masked in it.
_A_RESULT: Final = "a tools/call result"


class Router:
    """Agents' calls, from their decoded requests to their servers, and their replies.

    ``splice`` says whether a call's request and reply may be written around the bytes
    they carry (``protocol.jsonrpc.splice``); off, every call is encoded and checked as any
    other message is."""

    def __init__(
        self,
        servers: AllServers,
        askback: AskBackDriver,
        finish: SentFinish,
        policy: CallPolicy,
        records: CallRecords,
        *,
        budget: int,
        splice: bool,
        max_line_bytes: Callable[[], int] = lambda: DEFAULT_MAX_LINE,
    ) -> None:
        self.servers = servers
        self.askback = askback
        self._finish = finish
        self.policy = policy
        self.records = records
        self.resumes = Resumes(max_line_bytes=max_line_bytes)
        self.budget = budget  # daemon.result_budget_chars; set again on each reload
        self.splice = splice
        # Calls awaited in a task of their request, round by round.
        self.rounds = CallRounds(
            servers, askback, policy, records, self.reply, self.failed, self._who
        )

    def call_of(self, agent: Agent, request: splice.SplicedRequest | rpc.Request) -> AgentCall:
        """The call an agent's tools/call stands for, from what either decoder made of
        it. Raises rpc.RPCError or rpc.InvalidParams for an envelope that is wrong."""
        meta: mcp.Meta | None = None
        responses: Raw | UnsetType = UNSET
        state: Raw | UnsetType = UNSET
        if isinstance(request, splice.SplicedRequest):
            p = request.params
            name, arguments = p.name, p.arguments
            raw = p.meta
            ctx = agent.contexts.get(bytes(raw)) if raw is not UNSET else None
            if ctx is None:
                ctx, meta = spliced_context(agent, raw)
        else:
            params = rpc.decode_as(request.params, mcp.CallToolParams)
            name, arguments = params.name, params.arguments
            responses, state = params.inputResponses, params.requestState
            whole = params.meta if isinstance(params.meta, dict) else None
            ctx = agent.session.context_of(whole)
            meta = agents_own(whole)
        modern = ctx.era == "modern"
        if not modern:
            # Rounds of input are the 2026-07-28 era's: a legacy agent's are driven by
            # mcpd, so whatever it writes under their names is not sent on.
            responses = state = UNSET
        caps = ctx.capabilities if modern and ctx.capabilities else None
        out = Call(
            request.id,
            name,
            arguments,
            NO_ONE,
            ctx,
            meta=meta,
            input_responses=responses,
            request_state=state,
            progress=agent.progress,
            asker=agent.refusing_asker,
            owner=agent.owner,
            splice=self.splice,
            capabilities=caps,
        )
        tasks = caps is not None and surface.has_tasks(caps)
        return AgentCall(out, agent, agent, modern, tasks, self.records.now())

    def start(self, call: AgentCall) -> None:
        """Route ``call`` and start it at its server, without a task: its outcome goes
        to its agent once (``call.to``), maybe before this returns. One that must wait for a
        person's decision goes on in a task of its request (``Agent.in_task``)."""
        agent = call.agent
        routed = self.route(call, agent)
        if routed is None and call.tasks:
            # Its server may answer with a task, whose answers are looked at again
            # under what the call went out under: that is kept in the task's rounds.
            sent = self.policy.let_through(call, agent.profile)
            agent.in_task(call, functools.partial(self.rounds.serve, call, sent))
        elif routed is None:
            out = call.out  # ``call.sent()``, written out: nearly every call passes here
            out.caller = call
            self.servers.start(out)
        elif isinstance(routed, Ask | Resumed):
            agent.in_task(call, functools.partial(self.rounds.serve, call, routed))
        elif isinstance(routed, Continues):
            # Only the driver may take mcpd's requestState: it checks whose call and which
            # tool the token continues, or says it expired. Sent on as it is, it would be a
            # call no rule was asked about.
            agent.in_task(call, functools.partial(self.rounds.serve, call, None))
        else:
            call.to.finish(call, routed)

    async def run(self, call: AgentCall) -> bytes:
        """``start``, awaited in a task of the agent's request: its reply, after as many
        rounds as its server and agent need to ask each other things."""
        agent = call.agent
        going: Ask | Sent | Resumed | None = None
        try:
            routed = self.route(call, agent)
            if routed is None:  # let through, in the step that routed it
                going = self.policy.let_through(call, agent.profile)
            elif isinstance(routed, Ask | Resumed):
                going = routed
            elif not isinstance(routed, Continues):
                return self.reply(call, routed)[0]
        except Exception as exc:
            self.failed(call, exc)
            raise
        return await self.rounds.serve(call, going)

    def abandon(self, call: AgentCall) -> None:
        """The agent stopped waiting for ``call`` (it cancelled it, or hung up): its
        server is told, and no outcome is delivered."""
        call.let_go()
        self.records.tool_call(call, self._who(call, call.agent), "cancelled")

    def failed(self, call: AgentCall, exc: BaseException) -> None:
        """``call`` raised what nothing expected on its way (a fault in mcpd): its record
        says so, unless it has one already."""
        self.records.tool_call(call, self._who(call, call.agent), *ended(exc))

    def unreadable(self, agent: Agent, why: str) -> None:
        """A tools/call whose request could not be read as a call: its record."""
        info = agent.identity.info(agent.profile.name, agent.session.legacy_version is None)
        now = self.records.now()
        self.records.request(now, info, "tools/call", None, None, "error", reason_kept(why), 0)

    @staticmethod
    def _who(call: AgentCall, agent: Agent) -> AgentInfo:
        # The profile it was routed in: the connection may have switched since.
        return agent.identity.info(call.profile, call.modern)

    async def resume(self, call: AgentCall, answered: Outcome, head: Head) -> bytes:
        """A legacy agent's call started without a task (``start``), whose server
        answered ``input_required`` asking nothing (``askback.rounds.shedding``, which
        read its ``head``): its rounds go on in a task of its request from that answer,
        as they would have from the first."""
        return await self.rounds.serve(call, None, Had(answered, head))

    def route(self, call: AgentCall, agent: Agent) -> Outcome | Ask | Continues | Resumed | None:
        """Where ``call`` goes in the agent's profile: its server (``out.alias``) and
        the tool's name there; or the outcome it ends with here (arguments that are not
        an object, an unknown tool, what search mode's meta-tools answer, a held tool,
        the policy's refusal); or ``Ask``, when a person decides first; or
        ``CONTINUES``, when it carries mcpd's requestState (an answer to what mcpd
        asked for another call, which met the rules); or ``Resumed``, when it continues
        a call whose server answered ``input_required``. A retry that brings no token of
        mcpd's is refused (``resumes``)."""
        profile = agent.profile
        call.profile = profile.name
        out = call.out
        name = out.name
        if name in META_TOOLS:
            answered = unwrap(profile.view, out)
            if answered is not None:
                _before_the_rules(call)
                return answered
            name = out.name  # the call it stands for
        args = out.arguments
        if args is not UNSET and (not args or memoryview(args)[0] not in _OBJECT_OR_NULL):
            # Refused here, not passed on: a server that crashes on arguments that are
            # not an object takes every other agent's calls down with it.
            _before_the_rules(call)
            return rpc.RPCError(
                rpc.INVALID_PARAMS, "Invalid params: tools/call arguments must be an object"
            )
        entry = profile.lookup(name)
        call.local = name
        if entry is not None and entry.held is None:
            out.name, out.alias = entry.original, entry.alias
            call.sight = profile.view
        # An answer to what mcpd asked for a call that waits goes to that call, also when
        # its tool went or is held since: the call itself is looked at again once it is
        # approved, and ends saying why it was not sent, waiting no more.
        if out.request_state is not UNSET and self.policy.continues(call):
            _before_the_rules(call)  # its record, if it has one, is the refused token's
            return CONTINUES
        if out.request_state is not UNSET or out.input_responses is not UNSET:
            resumed = self.resumes.take(call, self._who(call, agent), profile)
            if isinstance(resumed, rpc.RPCError):
                _before_the_rules(call, resumed.message)
                return resumed
            if resumed is not None:
                call.decision, call.decided_by = resumed.decision, resumed.decided_by
                return resumed
        if entry is None:
            call.local = ""  # a name mcpd does not know: its record keeps what ``unknown`` does
            _before_the_rules(call, "unknown tool")
            return unknown_tool(
                self.servers, profile, name, own_user=agent.identity.reads_as_owner()
            )
        if entry.held is not None:
            # Refused where calls are routed, before any rule: the server is not asked.
            # Its record names it as the profile does: a name mcpd knows.
            call.local = name
            _before_the_rules(call, f"held: {entry.held}")
            return held_tool(entry, name)
        if self.policy.gate.empty:
            return None
        return self.policy.decide(call, entry, profile, self._who(call, agent))

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
        # ``_who`` and ``results.shaped_for``, written out: every call passes here.
        who = call.agent.identity.info(call.profile, call.modern)
        out = call.out
        if rid is None:
            rid = out.id
        if isinstance(outcome, rpc.RPCError):
            # A legacy server's ask to open a link, as this agent can take it.
            outcome = url_required.for_call(call, outcome)
        if isinstance(outcome, Raw):
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
                finished = self._finish(call, shaped, links, sent)
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


def _before_the_rules(call: AgentCall, refusal: str | None = None) -> None:
    """``call`` ends where it is routed (with ``refusal``, mcpd's words for why), before
    any rule was asked: its record says nobody decided it."""
    call.decision, call.decided_by, call.refusal = NO_DECISION, "", refusal


class Continues:
    """A call that answers what mcpd asked its agent for another call."""


CONTINUES: Final = Continues()
