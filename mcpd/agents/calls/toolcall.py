"""tools/call on the agent side: a call decoded into its ``AgentCall`` (which holds
the servers' ``Call``), routed by the agent's profile, and taken on until its reply.

A call is decoded once (``Router.call_of``, from what either decoder made of the
request) and routed once (``Router.route``): through the agent's profile, whose
search mode answers its own meta-tools, to a server and the tool's name there, and
past the policy's rules (``callpolicy``). What routing comes to is one ``RoutedCall``: an
outcome mcpd answers itself, or the call going on (let through, to be asked about, an
answer to what mcpd asked, the next round of a call its server asked things).

A call is taken on by one of two verbs. ``Router.start`` goes without a task: its one
outcome comes back to it, and on to the agent's connection, which writes the reply
``Router.reply`` makes (where the call's audit record is made). ``Router.serve``
is awaited in a task of the call's request, and returns the reply: a call whose
server may ask its agent things, every call over HTTP, and a legacy agent's call
whose server answered ``input_required`` asking nothing, from that answer. A call
started without a task that must wait (for a person's approval, for its server's task
or its rounds of asking back) goes on in a task of its request from where routing
left it (``Agent.in_task``), driven through the rounds of asking back (``call_rounds``),
each round's reply made by the same ``Router.reply``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Final, TypeAlias

from msgspec import UNSET, Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc import splice
from protocol.lines.framing import DEFAULT_MAX_LINE
from protocol.mcp import core as mcp
from protocol.mcp import features

from ...audit.record import NO_DECISION
from ...config.tables.model import DaemonConfig
from ...policy.decision.rules import ALLOW
from ...servers.all_servers import AllServers
from ...servers.shared import Call, Outage, Outcome
from ..agent import NO_ONE, Agent, AgentCall, Sent
from ..askback import url_required
from ..askback.call_rounds import CONTINUES, CallTask, Had, Onward
from ..askback.driver import AskBackDriver
from ..askback.resumes import Resumes
from ..lists.metatools import NAMES as META_TOOLS
from ..lists.search_mode import unwrap
from ..tasks.table import Tasks
from .callpolicy import CallPolicy
from .callrecords import CallRecords, outcome_of, reason_kept
from .request_context import agents_own, spliced_context
from .result_bounds import error_within
from .results import shape_call_result
from .unrouted import held_tool, unknown_tool

# How arguments that are an object, or null, begin.
_OBJECT_OR_NULL: Final = (ord("{"), ord("n"))

# What routing a call comes to: the outcome it ends with here, or where it goes on.
RoutedCall: TypeAlias = Outcome | Onward

# What the journal calls a result when it tells of a secret masked in it.
_A_RESULT: Final = "a tools/call result"


class Router:
    """Agents' calls, from their decoded requests to their servers, until their replies.

    ``splice`` says whether a call's request and reply may be written around the bytes
    they carry (``protocol.jsonrpc.splice``); off, every call is encoded and checked as any
    other message is."""

    def __init__(
        self,
        servers: AllServers,
        askback: AskBackDriver,
        tasks: Tasks,
        policy: CallPolicy,
        records: CallRecords,
        *,
        budget: int,
        splice: bool,
        settings: Callable[[], DaemonConfig],
        max_line_bytes: Callable[[], int] = lambda: DEFAULT_MAX_LINE,
    ) -> None:
        """``askback`` drives the rounds of a server asking its agent things; ``tasks``
        keeps the task handles results hand agents (both shared with the other
        methods, ``beyond_tools``); ``budget``: the result budget; ``settings``: the
        daemon's, which set one user's share of the rounds kept for retries."""
        self.servers = servers
        self.askback = askback
        self.tasks = tasks
        self.policy = policy
        self.records = records
        # Where a modern agent's call whose server asked it things is kept for its retry.
        self.resumes = Resumes(max_line_bytes=max_line_bytes, settings=settings)
        self.splice = splice
        self.budget = budget  # daemon.result_budget_chars; set again on each reload

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
        tasks = caps is not None and features.has_tasks(caps)
        arrived = self.records.now()
        return AgentCall(out, agent, to=agent, modern=modern, tasks=tasks, arrived=arrived)

    def start(self, call: AgentCall) -> None:
        """Route ``call`` and start it at its server, without a task: its outcome goes
        to its agent once (``call.to``), maybe before this returns. One that must wait
        (for a person's decision, its server's task, its rounds) goes on in a task of
        its request (``Agent.in_task``) from where routing left it."""
        routed = self.route(call)
        if isinstance(routed, Sent) and not call.tasks:
            call.let_through = routed
            self.servers.start(call.sent())
        elif isinstance(routed, Onward):
            call.agent.in_task(call, functools.partial(self.serve, call, routed))
        else:
            call.to.finish(call, routed)

    async def serve(self, call: AgentCall, going: Onward | Had | None = None) -> bytes:
        """``call`` taken on in a task of its agent's request: its reply, after as many
        rounds as its server and agent need to ask each other things (``CallTask``).
        ``going``: where it goes on from, when it was started without a task
        (``start``): as routing left it, or from its first round (``Had``), when its
        server answered ``input_required`` asking nothing of a legacy agent
        (``askback.rounds.shedding``, which read that answer's head); its rounds go on
        from that answer, as they would have from the first. None: routed here."""
        if going is None:
            try:
                routed = self.route(call)
                if not isinstance(routed, Onward):
                    return self.reply(call, routed)[0]
            except Exception as exc:
                self.records.failed(call, exc)
                raise
            going = routed
        try:
            task = CallTask(
                call, going, self.servers, self.policy, self.records, self.reply, self.askback
            )
            return await task.run()
        except BaseException as exc:
            self.records.failed(call, exc)
            raise

    def abandon(self, call: AgentCall) -> None:
        """The agent stopped waiting for ``call`` (it cancelled it, or hung up): its
        server is told, and no outcome is delivered."""
        call.let_go()
        self.records.tool_call(call, self.records.who(call), "cancelled")

    def unreadable(self, agent: Agent, why: str) -> None:
        """A tools/call whose request could not be read as a call: its record."""
        info = agent.identity.info(agent.profile.name, agent.session.legacy_version is None)
        now = self.records.now()
        self.records.request(now, info, "tools/call", None, None, "error", reason_kept(why), 0)

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
        who = self.records.who(call)
        out = call.out
        if rid is None:
            rid = out.id
        if isinstance(outcome, rpc.RPCError):
            # A legacy server's ask to open a link, as this agent can take it; the error
            # it comes to held to the budget once its links are read from its data.
            outcome = url_required.for_call(call, outcome)
            if isinstance(outcome, rpc.RPCError):
                outcome = error_within(outcome, self.budget)
        if isinstance(outcome, Raw):
            # ``results.shaped_for``, written out, with the head the scheduler read: every
            # call passes here (tests/mcpd/agents/calls/test_toolcall_reply.py holds the two alike).
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
            finished: Raw | dict[str, object] | Outage = shaped
            if links or call.tasks:
                finished = self.tasks.finish(call, shaped, links, sent, whose=call.whose())
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
                outcome.for_agent(call.agent.reads_shared_output()).result()
                if isinstance(outcome, Outage)
                else outcome
            )
            if call.modern:
                own.resultType = mcp.COMPLETE
            line = rpc.encode_result(rid, own)
        self.records.tool_call(call, who, *outcome_of(outcome), len(line))
        return line, False

    def route(self, call: AgentCall) -> RoutedCall:
        """Where ``call`` goes in its agent's profile: its server (``out.alias``) and
        the tool's name there, let through (``Sent``, with the routed tool, the profile
        and what the rules said); or the outcome it ends
        with here (arguments that are not an object, an unknown tool, what search mode's
        meta-tools answer, a held tool, the policy's refusal); or ``Ask``, when a person
        decides first; or ``CONTINUES``, when it carries mcpd's requestState (an answer
        to what mcpd asked for another call, which met the rules); or ``Resumed``, when
        it continues a call whose server answered ``input_required``. A retry that
        brings no token of mcpd's is refused (``resumes``)."""
        agent = call.agent
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
        call.known = True
        if entry is not None and entry.held is None:
            out.original, out.alias = entry.original, entry.alias
            call.sight = profile.view
        # An answer to what mcpd asked for a call that waits goes to that call, also when
        # its tool went or is held since: the call itself is looked at again once it is
        # approved, and ends saying why it was not sent, waiting no more.
        if out.request_state is not UNSET and self.policy.continues(call):
            _before_the_rules(call)  # its record, if it has one, is the refused token's
            return CONTINUES
        if out.request_state is not UNSET or out.input_responses is not UNSET:
            resumed = self.resumes.take(call, self.records.who(call), profile)
            if isinstance(resumed, rpc.RPCError):
                _before_the_rules(call, resumed.message)
                return resumed
            if resumed is not None:
                call.decision, call.decided_by = resumed.decision, resumed.decided_by
                return resumed
        if entry is None:
            call.known = False  # a name mcpd does not know: its record keeps what ``unknown`` does
            _before_the_rules(call, "unknown tool")
            return unknown_tool(self.servers, profile, name, own_user=agent.reads_shared_output())
        if entry.held is not None:
            # Refused where calls are routed, before any rule: the server is not asked.
            # Its record names it as the profile does: a name mcpd knows.
            call.held = (entry.alias, entry.original)
            _before_the_rules(call, f"held: {entry.held}")
            return held_tool(entry, name)
        if self.policy.gate.empty:
            return Sent(entry, profile, ALLOW)
        return self.policy.decide(call, entry, profile, self.records.who(call))


def _before_the_rules(call: AgentCall, refusal: str | None = None) -> None:
    """``call`` ends where it is routed (with ``refusal``, mcpd's words for why), before
    any rule was asked: its record says nobody decided it."""
    call.decision, call.decided_by, call.refusal = NO_DECISION, "", refusal
