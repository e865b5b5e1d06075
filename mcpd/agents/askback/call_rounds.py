"""A tools/call awaited in a task of its agent's request (``toolcall.Router.run``): asked
about first when the policy says so, then driven through the rounds of its server
asking its agent things (``driver.AskBackDriver``), each round after the first
looked at again by the rules, as they or the tool may have changed while the agent
answered. A modern agent's retry that continues a call its server answered
``input_required`` (``resumes``) is that call's next round.
"""

from __future__ import annotations

from collections.abc import Callable

from msgspec import UNSET, Raw, UnsetType

from protocol import jsonrpc as rpc
from protocol import mcp

from ...policy.agent import AgentInfo
from ...servers.all_servers import AllServers
from ...servers.shared import Asker, Call, Outcome
from ..agent import Agent, AgentCall
from ..calls.callpolicy import Ask, CallPolicy, Sent
from ..calls.callrecords import CallRecords, ended
from .awaited import Awaited
from .driver import AgentSide, AskBackDriver
from .resumes import Resumed
from .rounds import RoundTrip

__all__ = ["CallRounds"]

# The reply line for a call's outcome (the call last sent under what, under which id), and
# whether it was spliced (``Router.reply``).
Reply = Callable[[AgentCall, Outcome, Sent | None, rpc.Id | None], tuple[bytes, bool]]


class CallRounds:
    def __init__(
        self,
        servers: AllServers,
        askback: AskBackDriver,
        policy: CallPolicy,
        records: CallRecords,
        reply: Reply,
        failed: Callable[[AgentCall, BaseException], None],
        who: Callable[[AgentCall, Agent], AgentInfo],
    ) -> None:
        """``failed`` records a call that raised what nothing expected; ``who`` is the
        agent as the call's records name it."""
        self.servers = servers
        self.askback = askback
        self.policy = policy
        self.records = records
        self.reply = reply
        self.failed = failed
        self._who = who

    async def serve(
        self,
        call: AgentCall,
        routed: Ask | Sent | Resumed | None,
        answered: Outcome | None = None,
    ) -> bytes:
        """A routed call, awaited: asked about first when the policy says so (``Ask``),
        then through the rounds of its server asking its agent things. None: a call
        that only brings the answer to what mcpd asked for another (``Continues``), or
        one let through already whose server ``answered``."""
        agent = call.agent
        try:
            if isinstance(routed, Resumed):
                # The next round of a call that met the rules: looked at again first, as
                # each round after the first is.
                return await self._rounds(call, agent, routed.sent, False, answered)
            return await self._rounds(call, agent, routed, True, answered)
        except rpc.RPCError as exc:
            # A requestState that names no wait of mcpd's (expired, another agent's):
            # this request's error, never the connection's.
            self.records.tool_call(call, self._who(call, agent), "error", exc.message)
            return rpc.encode_error(call.out.id, exc.code, exc.message, exc.data)
        except BaseException as exc:
            self.records.tool_call(call, self._who(call, agent), *ended(exc))
            raise

    async def _rounds(
        self,
        call: AgentCall,
        agent: Agent,
        routed: Ask | Sent | None,
        first: bool,
        answered: Outcome | None,
    ) -> bytes:
        out = call.out
        side = AgentSide(
            owner=out.owner,
            modern=call.modern,
            capabilities=out.ctx.capabilities,
            requests=agent.asks,
            send=agent.offer,
            own_user=agent.identity.reads_as_owner(),
        )
        out.capabilities = side.upstream_capabilities()

        def shape(rid: rpc.Id, outcome: Outcome) -> bytes:
            try:
                sent = routed if isinstance(routed, Sent) else None
                return self.reply(call, outcome, sent, rid)[0]
            except Exception as exc:  # where no one else records it: the ask-back task
                self.failed(call, exc)
                raise

        # A retry that continues a call (``Resumed``) is past its first round, and its
        # requestState is the server's, no ask of mcpd's.
        state = out.request_state if first else UNSET

        async def upstream(request: Call, asker: Asker | None) -> Outcome:
            # ``request`` is ``out``, as the answers of the round before left it.
            # Each round goes under what the last one went under: asked about before the
            # first when the policy says so, looked at again before each after it (the
            # rules or the tool may have changed while the agent answered its server).
            nonlocal routed, first, answered
            if answered is not None:  # the first round's, from before its task
                outcome, answered, first = answered, None, False
                return outcome
            try:
                who = self._who(call, agent)
                going: mcp.CallToolResult | Sent | None
                if isinstance(routed, Ask):
                    going = await self.policy.ask(call, who, agent.kin, routed, asker)
                elif isinstance(routed, Sent) and not first:
                    going = await self.policy.again(call, who, agent.kin, routed, asker)
                else:
                    going = routed
                if isinstance(going, mcp.CallToolResult):
                    return going
                routed, first = going, False
                return await self._upstream(call, asker)
            except BaseException as exc:
                # Here too: a modern agent's call that waits for its agent's answer runs
                # on after the agent's request was answered with input_required.
                self.records.tool_call(call, self._who(call, agent), *ended(exc))
                raise

        return await self.askback.serve(
            side,
            out,
            RoundTrip(send=upstream, shape=shape, resend=_retry),
            rid=out.id,
            method="tools/call",
            name=call.local,
            state=state,
            responses=out.input_responses,
        )

    async def _upstream(self, call: AgentCall, asker: Asker | None) -> Outcome:
        """One round of ``run``: the call at its server, awaited."""
        awaited = Awaited()
        call.to, call.out.asker = awaited, asker
        self.servers.start(call.sent())
        try:
            return await awaited.outcome()
        except BaseException:
            call.let_go()
            raise


def _retry(call: Call, responses: Raw | UnsetType, state: Raw | UnsetType) -> Call:
    """The call again, with the answers to what its server asked and its state."""
    call.input_responses, call.request_state = responses, state
    return call
