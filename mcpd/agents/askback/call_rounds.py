"""A tools/call awaited in a task of its agent's request (``toolcall.Router.serve``): asked
about first when the policy says so, then driven through the rounds of its server
asking its agent things (``driver.AskBackDriver``), each round after the first
looked at again by the rules, as they or the tool may have changed while the agent
answered. A modern agent's retry that continues a call its server answered
``input_required`` (``resumes``) is that call's next round.
"""

from __future__ import annotations

from typing import NamedTuple

from msgspec import UNSET, Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

from ...servers.all_servers import AllServers
from ...servers.shared import Asker, Call, Outcome
from ..agent import AgentCall
from ..calls.callpolicy import Ask, CallPolicy, Sent
from ..calls.replies import CallReplies
from .awaited import Awaited
from .driver import AgentSide, AskBackDriver
from .resumes import Resumed
from .rounds import Head, RoundTrip

__all__ = ["CallRounds", "CallTask", "Had"]


class Had(NamedTuple):
    """A call's first round, had before its task: its outcome, and that outcome's head
    as it was read then (not read again)."""

    outcome: Outcome
    head: Head


class CallRounds:
    def __init__(
        self,
        servers: AllServers,
        askback: AskBackDriver,
        policy: CallPolicy,
        replies: CallReplies,
    ) -> None:
        """``replies``: each round's reply line, and the call's record when it raised
        what nothing expected."""
        self.servers = servers
        self.askback = askback
        self.policy = policy
        self.replies = replies

    async def serve(
        self,
        call: AgentCall,
        going: Ask | Sent | Resumed | None,
        answered: Had | None = None,
    ) -> bytes:
        """A routed call, awaited, going under ``going``: asked about first when the
        policy says so (``Ask``), then through the rounds of its server asking its
        agent things. None: a call that only brings the answer to what mcpd asked for
        another (``toolcall.Continues``), or one let through already whose server
        ``answered``."""
        try:
            if isinstance(going, Resumed):
                # The next round of a call that met the rules: looked at again first, as
                # each round after the first is.
                task = CallTask(self, call, going.sent, False, answered)
            else:
                task = CallTask(self, call, going, True, answered)
            return await task.run()
        except rpc.RPCError as exc:
            # A requestState that names no wait of mcpd's (expired, another agent's):
            # this request's error, never the connection's.
            self.replies.records.tool_call(call, self.replies.who(call), "error", exc.message)
            return rpc.encode_error(call.out.id, exc.code, exc.message, exc.data)
        except BaseException as exc:
            self.replies.failed(call, exc)
            raise


class CallTask:
    """One call awaited in a task of its agent's request, round by round: what its next
    round goes under, and where each round's outcome is handed to the task (the same
    ``Awaited``, the call's for as long as the task lasts)."""

    __slots__ = ("answered", "awaited", "call", "first", "going", "read_first", "rounds")

    def __init__(
        self,
        rounds: CallRounds,
        call: AgentCall,
        going: Ask | Sent | None,
        first: bool,
        answered: Had | None,
    ) -> None:
        """``going``: what its next round goes under (``Ask``: a person decides before
        its first; ``Sent``: looked at again before each after it). ``first``: its first
        round is still to come. ``answered``: that round's outcome, had before the task."""
        self.rounds = rounds
        self.call = call
        self.going = going
        self.first = first
        self.answered = answered
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
            own_user=agent.identity.reads_as_owner(),
        )
        out.capabilities = side.upstream_capabilities()
        # A retry that continues a call (``Resumed``) is past its first round, and its
        # requestState is the server's, no ask of mcpd's.
        state = out.request_state if self.first else UNSET
        return await self.rounds.askback.serve(
            side,
            out,
            RoundTrip(send=self.send, shape=self.shape, resend=_retry, read=self.read),
            rid=out.id,
            method="tools/call",
            name=call.local,
            arguments=out.arguments,
            state=state,
            responses=out.input_responses,
        )

    async def send(self, request: Call, asker: Asker | None) -> Outcome:
        """One round: ``request`` (the call's ``out``, as the answers of the round before
        left it) at its server, under what the last round went under: asked about
        before the first when the policy says so, looked at again before each after it
        (the rules or the tool may have changed while the agent answered its server)."""
        if self.answered is not None:  # the first round's, from before its task
            (outcome, self.read_first), self.answered, self.first = self.answered, None, False
            return outcome
        call, rounds = self.call, self.rounds
        try:
            who = rounds.replies.who(call)
            going: mcp.CallToolResult | Sent | None
            # mcpd's command line is told a wait's id: its user has no form to answer.
            told = call.agent.waits if call.agent.tells_waits else None
            if isinstance(self.going, Ask):
                going = await rounds.policy.ask(call, who, call.agent.kin, self.going, asker, told)
            elif isinstance(self.going, Sent) and not self.first:
                going = await rounds.policy.again(
                    call, who, call.agent.kin, self.going, asker, told
                )
            else:
                going = self.going
            if isinstance(going, mcp.CallToolResult):
                return going
            self.going, self.first = going, False
            request.asker = asker
            rounds.servers.start(call.sent())
            try:
                return await self.awaited.outcome()
            except BaseException:
                call.let_go()
                raise
        except BaseException as exc:
            # Here too: a modern agent's call that waits for its agent's answer runs
            # on after the agent's request was answered with input_required.
            rounds.replies.failed(call, exc)
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
            return self.rounds.replies.reply(call, outcome, sent, rid)[0]
        except Exception as exc:  # where no one else records it: the ask-back task
            self.rounds.replies.failed(call, exc)
            raise


def _retry(call: Call, responses: Raw | UnsetType, state: Raw | UnsetType) -> Call:
    """The call again, with the answers to what its server asked and its state."""
    call.input_responses, call.request_state = responses, state
    return call
