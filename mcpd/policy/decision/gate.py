"""The policy as the call path meets it: one decision for each call, and for the
calls a person decides, the wait.

``decide`` runs the rules, then the matched rule's rate limit for the calling agent;
``ask`` holds an ``ask`` call in the approvals registry (or lets it through when an
approval was remembered for the connection). What the model reads when a call is
refused is built by ``refusals``.

A wait may outlast the rules it began under. A reload ends at once each waiting call
the new rules deny; an approval stands only when the rules, put to again once the wait
is over (``stands``), decide the call as they did when it began to wait, and only then
is it remembered.

An approval is of a tool as its server ran then, and as it was defined: a reload that
stops or starts the server again (its command, its sandbox, its settings changed)
forgets the approvals remembered for its tools, and one given for a call that waited
across such a reload is for that call alone; an approval is remembered for the tool's
definition (``defined``), so a tool defined anew is asked about again.

A person approves a call from its arguments as they are shown (``shown.showing``): before
anyone is asked, ``shown`` reads them once, and arguments that reading cannot show as
the server will read them (a key given twice, a number past what a double holds, text
that is not JSON) are refused (``shown.reading.Unshowable``) rather than shown one way and
run another.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Final

import msgspec
import trio

from ...config.tables.policy import PolicyRule
from ...registry.pinning.definitions import definition
from ..agent import AgentInfo
from ..deciders.kin import AgentKin
from ..redaction.masking import KnownSecrets
from ..shown.showing import ShownArguments, shown_arguments
from ..waiting.approvals import AgentAnswer, ApprovalError, ApprovalRequest, Approvals, Verdict
from .rates import RateLimits
from .rules import CallFacts, Decision, Policy

REMEMBERED: Final = "remembered"
# Arguments longer than this are read in a worker thread: reading is work in
# proportion to their size, and the other agents' calls go on meanwhile.
READ_HERE: Final = 64 * 1024

# Who may not decide the calls of the agent that asks (``deciders.kin.AgentKin``): looked up once
# a call is to wait, and only then.
FindKin = Callable[[], Awaitable[AgentKin]]
# Told the id a call waits for a person under, and for how long at most.
WaitOpened = Callable[[str, float], None]


class CallGate:
    def __init__(
        self,
        approvals: Approvals,
        secrets: KnownSecrets,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self.approvals = approvals
        self.secrets = secrets
        self._clock = clock
        self.policy = Policy()
        self._rules: tuple[PolicyRule, ...] = ()
        self.empty = True
        self.rates = RateLimits()
        # How many reloads stopped or started each server again.
        self._restarts: Counter[str] = Counter()

    def configure(self, rules: Sequence[PolicyRule], restarted: Collection[str] = ()) -> None:
        """The config's rules, at start and after each reload, which stops or starts
        the servers ``restarted``. Calls waiting for a person that the new rules deny
        are refused at once."""
        if restarted:
            self._restarts.update(restarted)
            self.approvals.remembered.forget_servers(restarted)
        # Approvals and rates are kept under their rule's index: once the rules differ,
        # that index may name another rule, one the person never approved anything
        # under, or whose calls were never counted.
        changed = tuple(rules) != self._rules
        if changed:
            self.approvals.remembered.forget_all()
            self.rates = RateLimits()
        self._rules = tuple(rules)
        self.policy = Policy(rules)
        # No rules: every call is allowed, and nothing about it need be looked up.
        self.empty = self.policy.empty
        if changed:
            self.approvals.overrule()

    def decide(self, facts: CallFacts, agent: AgentInfo) -> Decision:
        decision = self.policy.decide(facts)
        if decision.rate is None or decision.action == "deny":
            return decision
        wait = self.rates.admit(decision, agent.key, self._clock())
        if wait is None:
            return decision
        return msgspec.structs.replace(decision, action="deny", limited=wait)

    def request(
        self,
        facts: CallFacts,
        agent: AgentInfo,
        kin: AgentKin,
        decision: Decision,
        arguments: ShownArguments,
    ) -> ApprovalRequest:
        seen = arguments.glance
        return ApprovalRequest(
            agent=agent,
            kin=kin,
            tool=facts.name,
            server=facts.server,
            original=facts.original,
            arguments=seen.text,
            shortened=seen.shortened,
            keys_left_out=seen.keys_left_out,
            whole=arguments.whole,
            rule=decision.rule,
            reason=decision.reason,
        )

    async def shown(self, arguments: bytes | msgspec.Raw | None) -> ShownArguments:
        """The arguments as a person is shown them, mcpd's secrets masked. Raises
        ``RepeatedKey`` or ``Unshowable`` when they cannot be shown as the server will
        read them."""
        secrets = self.secrets.current()
        if arguments is None or len(arguments) <= READ_HERE:
            return shown_arguments(arguments, secrets)
        return await trio.to_thread.run_sync(shown_arguments, arguments, secrets)

    async def ask(
        self,
        facts: CallFacts,
        agent: AgentInfo,
        kin: FindKin,
        decision: Decision,
        arguments: ShownArguments,
        agent_answer: AgentAnswer | None = None,
        kept: int = 0,
        opened: WaitOpened | None = None,
    ) -> Verdict | Decision:
        """Wait for a person's decision on an ``ask`` call, which keeps ``kept`` bytes
        meanwhile. ``agent_answer`` asks the agent's user (``waiting.asking``) while the
        operator can decide too; ``opened`` is told the id it waits under and for how
        long (``Approvals.ask``). The person's verdict; or the rules' decision, a
        ``deny``, when a reload made them refuse the call while it waited. An approval
        is not remembered here: it is not known yet to stand (``stands``)."""
        if decision.remember and self.approvals.remembered.holds(
            agent.connection, decision.rule, facts.server, facts.original, defined(facts)
        ):
            return Verdict("approved", REMEMBERED)
        restarts = self._restarts[facts.server]
        request = self.request(facts, agent, await kin(), decision, arguments)
        waiting = _Waiting(self, facts)
        try:
            verdict = await self.approvals.ask(
                request, decision.timeout, agent_answer, kept, waiting.overrule, opened
            )
        except ApprovalError as exc:
            return Verdict("unanswered", "mcpd", str(exc))
        if waiting.ruled is not None:
            return waiting.ruled
        if self._restarts[facts.server] != restarts:
            return msgspec.structs.replace(verdict, lasting=False)
        return verdict

    def still(self, facts: CallFacts, asked: Decision) -> bool:
        """Whether the rules in force decide a call of ``facts`` as ``asked``, the
        decision it was asked about under (a reload since may have removed its rule,
        or put another in its place in the list)."""
        return self.policy.decide(facts) == asked

    def stands(
        self, facts: CallFacts, agent: AgentInfo, asked: Decision, lasting: bool = True
    ) -> Decision | None:
        """Whether the approval (``lasting``: ``Verdict.lasting``) of a call asked
        about under ``asked`` stands, its wait over, with ``facts`` what the rules see
        of its tool now: None when they decide it as they did (the same ``ask``: a
        person's approval is what it needs; kept for the connection when the rule says
        so and it is lasting); else their decision now, its rate counted as any
        call's is."""
        if self.policy.decide(facts) != asked:
            return self.decide(facts, agent)
        if asked.remember and lasting:
            self.approvals.remembered.add(
                agent.connection, asked.rule, facts.server, facts.original, defined(facts)
            )
        return None


def defined(facts: CallFacts) -> bytes:
    """The digest of the definition of the tool a call is to, as its profile lists it
    (as pins digest definitions): what an approval remembered for a connection is of.
    Worked out only for a call whose rule remembers approvals."""
    return b"" if facts.tool is None else hashlib.sha256(definition(facts.tool)).digest()


class _Waiting:
    """One call waiting for a person, as a reload's rules see it."""

    __slots__ = ("_facts", "_gate", "ruled")

    def __init__(self, gate: CallGate, facts: CallFacts) -> None:
        self._gate = gate
        self._facts = facts
        self.ruled: Decision | None = None  # the rules' deny that ended the wait

    def overrule(self) -> Verdict | None:
        decision = self._gate.policy.decide(self._facts)
        if decision.action != "deny":
            return None  # still the person's to decide, or to be sent once approved
        self.ruled = decision
        return Verdict("denied", decision.by, decision.reason)
