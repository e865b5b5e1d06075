"""A tools/call awaited in a task of its agent's request (``toolcall.Router.serve``): asked
about first when the policy says so, then driven through the rounds of its server
asking its agent things (``driver.AskBackDriver``), each round after the first
looked at again by the rules, as they or the tool may have changed while the agent
answered. A modern agent's retry that continues a call its server answered
``input_required`` (``resumes``) is that call's next round; so is each call again mcpd
makes for a legacy agent whose call began without a task (``Had``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NamedTuple, TypeAlias

from msgspec import UNSET, Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

from ...servers.all_servers import AllServers
from ...servers.shared import Asker, Call, Outcome
from ..agent import AgentCall, Sent
from ..calls.callpolicy import Ask, CallPolicy
from ..calls.callrecords import CallRecords
from .awaited import Awaited
from .driver import AgentSide, AskBackDriver, Asked
from .resumes import Resumed
from .rounds import Head, RoundTrip

__all__ = ["CONTINUES", "CallTask", "Continues", "Had", "Onward"]


class Continues:
    """A call that answers what mcpd asked its agent for another call: only the driver
    may take it, as it checks whose call and which tool the token continues, or says
    it expired. Sent on as it is, it would be a call no rule was asked about."""


CONTINUES: Final = Continues()

# Where a routed call goes on: let through under ``Sent``; to be asked about first
# (``Ask``); an answer to what mcpd asked (``CONTINUES``); the next round of a call
# its server answered ``input_required`` (``Resumed``).
Onward: TypeAlias = Sent | Ask | Continues | Resumed

# What makes a round's reply line (``toolcall.Router.reply``): for the call, its
# outcome, what it went under and the agent's request it answers; the line, and whether
# it was spliced.
CallReplier: TypeAlias = Callable[
    [AgentCall, Outcome, Sent | None, rpc.Id | None], tuple[bytes, bool]
]


class Had(NamedTuple):
    """A call's first round, had before its task (``Connection.finish``): its outcome,
    that outcome's head as it was read then (not read again), and what the rules let
    the call through with, which each round after it is looked at again against."""

    outcome: Outcome
    head: Head
    sent: Sent


class CallTask:
    """One call awaited in a task of its agent's request, round by round: what its next
    round goes under, and where each round's outcome is handed to the task (the same
    ``Awaited``, the call's for as long as the task lasts). It holds the router's parts
    it uses, not the router, which makes it."""

    __slots__ = (
        "askback",
        "awaited",
        "call",
        "first",
        "going",
        "had",
        "policy",
        "read_first",
        "records",
        "reply",
        "servers",
    )

    def __init__(
        self,
        call: AgentCall,
        going: Onward | Had,
        servers: AllServers,
        policy: CallPolicy,
        records: CallRecords,
        reply: CallReplier,
        askback: AskBackDriver,
    ) -> None:
        """``going``: where it goes on from (``Onward``, as routing left it; ``Had``:
        its first round, had before the task). ``reply``: each round's reply line;
        ``records``: the call's record when it raised what nothing expected."""
        self.call = call
        self.servers, self.policy, self.askback = servers, policy, askback
        self.records, self.reply = records, reply
        # What its next round goes under: ``Ask``, a person decides before its first;
        # ``Sent``, looked at again before each after it.
        self.going: Ask | Sent | Continues
        self.first = True  # its first round is still to come
        self.had: Had | None = None  # that round's outcome, had before the task
        if isinstance(going, Resumed):
            # A retry that continues a call is past its first round, and its
            # requestState is the server's, no ask of mcpd's.
            self.going, self.first = going.sent, False
        elif isinstance(going, Had):
            self.going, self.had = going.sent, going
        else:
            self.going = going
        # The head of the first round's outcome, when it was read before the task.
        self.read_first: Head | None = None
        self.awaited = call.to = Awaited()

    async def run(self) -> bytes:
        """Its reply, after the rounds of asking back (``AskBackDriver.serve``)."""
        call, out = self.call, self.call.out
        agent = call.agent
        side = AgentSide(
            owner=out.owner,
            modern=call.modern,
            capabilities=out.ctx.capabilities,
            requests=agent.asks,
            send=agent.offer,
            own_user=agent.reads_shared_output(),
        )
        out.capabilities = side.upstream_capabilities()
        state = out.request_state if self.first else UNSET
        asked = Asked(
            out, out.id, "tools/call", out.name, out.arguments, state, out.input_responses
        )
        trip = RoundTrip(send=self.send, shape=self.shape, resend=_retry, read=self.read)
        try:
            return await self.askback.serve(side, asked, trip)
        except rpc.RPCError as exc:
            # A requestState that names no wait of mcpd's (expired, another agent's):
            # this request's error, never the connection's.
            self.records.tool_call(call, self.records.who(call), "error", exc.message)
            return rpc.encode_error(out.id, exc.code, exc.message, exc.data)

    async def send(self, request: Call, asker: Asker | None) -> Outcome:
        """One round: ``request`` (the call's ``out``, as the answers of the round before
        left it) at its server, under what the last round went under: asked about
        before the first when the policy says so, looked at again before each after it
        (the rules or the tool may have changed while the agent answered its server)."""
        if self.had is not None:  # the first round's, from before its task
            outcome, self.read_first = self.had.outcome, self.had.head
            self.had, self.first = None, False
            return outcome
        call = self.call
        try:
            who = self.records.who(call)
            going: mcp.CallToolResult | Sent
            # mcpd's command line is told a wait's id: its user has no form to answer.
            told = call.agent.waits if call.agent.tells_waits else None
            if isinstance(self.going, Ask):
                going = await self.policy.ask(call, who, call.agent.kin, self.going, asker, told)
            elif isinstance(self.going, Continues):
                raise AssertionError("an answer to what mcpd asked went to a server")
            elif self.first:
                going = self.going
            else:
                going = await self.policy.again(call, who, call.agent.kin, self.going, asker, told)
            if isinstance(going, mcp.CallToolResult):
                return going
            self.going, self.first = going, False
            request.asker = asker
            self.servers.start(call.sent())
            try:
                return await self.awaited.outcome()
            except BaseException:
                call.let_go()
                raise
        except BaseException as exc:
            # Here too: a modern agent's call that waits for its agent's answer runs
            # on after the agent's request was answered with input_required.
            self.records.failed(call, exc)
            raise

    def read(self, request: Call) -> Head | None:
        """The head of the last round's outcome as read already: before the task (the
        first round's, once), or by its server's scheduler (``Call.head``)."""
        head, self.read_first = self.read_first, None
        return head if head is not None else request.head

    def shape(self, rid: rpc.Id, outcome: Outcome) -> bytes:
        """The reply to the agent's request ``rid`` for ``outcome``."""
        call = self.call
        try:
            sent = self.going if isinstance(self.going, Sent) else None
            return self.reply(call, outcome, sent, rid)[0]
        except Exception as exc:  # where no one else records it: the ask-back task
            self.records.failed(call, exc)
            raise


def _retry(call: Call, responses: Raw | UnsetType, state: Raw | UnsetType) -> Call:
    """The call again, with the answers to what its server asked and its state."""
    call.input_responses, call.request_state = responses, state
    return call
