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

A person approves a call from its arguments as they are shown, decoded: where an
object gives a key twice, the decoding keeps one value, and a server's parser may keep
the other. ``repeated_key`` finds such a key, so that a call a person must approve is
refused instead of shown one way and run another.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

import msgspec
import trio

from protocol.visible import visible

from ..config.policy import PolicyRule
from .agent import AgentInfo
from .approvals import AgentAnswer, ApprovalError, ApprovalRequest, Approvals, Verdict
from .kin import AgentKin
from .masking import KnownSecrets
from .rates import RateLimits
from .rules import CallFacts, Decision, Policy

REMEMBERED: Final = "remembered"
# What a person is shown of a call's arguments at most (the JSON text, masked).
MAX_SHOWN: Final = 8192
# How much of a repeated key is said back.
KEY_SHOWN: Final = 60
_encode: Final = msgspec.json.Encoder().encode

# Who may not decide the calls of the agent that asks (``kin.AgentKin``): looked up once
# a call is to wait, and only then.
FindKin = Callable[[], Awaitable[AgentKin]]


class _Repeated(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _each_key_once(pairs: list[tuple[str, object]]) -> dict[str, object]:
    members = dict(pairs)
    if len(members) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Repeated(key)
            seen.add(key)
    return members


class KeysUnchecked(Exception):
    """The arguments could not be read through to see that each key is given once: a
    person cannot be shown them as the server will read them."""


def repeated_key(arguments: bytes | None) -> str | None:
    """A key some object of ``arguments`` gives more than once, at any depth, written
    out and kept short; None when each is given once. Raises KeysUnchecked when they
    cannot be read through (nested past the reader's depth, a number too long to read):
    what cannot be checked is refused, not taken as checked."""
    if not arguments:
        return None
    try:
        json.loads(arguments.decode("utf-8"), object_pairs_hook=_each_key_once)
    except _Repeated as found:
        key = visible(found.key)
        return key if len(key) <= KEY_SHOWN else key[: KEY_SHOWN - 1] + "…"
    except RecursionError:
        raise KeysUnchecked("they are nested too deeply") from None
    except ValueError:
        raise KeysUnchecked("mcpd cannot read them as JSON") from None
    return None


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

    def configure(self, rules: Sequence[PolicyRule]) -> None:
        """The config's rules, at start and after each reload. Calls waiting for a
        person that the new rules deny are refused at once."""
        # Approvals and rates are kept under their rule's index: once the rules differ,
        # that index may name another rule, one the person never approved anything
        # under, or whose calls were never counted.
        changed = tuple(rules) != self._rules
        if changed:
            self.approvals.forget_all()
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
        arguments: bytes | None,
    ) -> ApprovalRequest:
        return ApprovalRequest(
            agent=agent,
            kin=kin,
            tool=facts.name,
            server=facts.server,
            original=facts.original,
            arguments=self.shown_arguments(arguments),
            rule=decision.rule,
            reason=decision.reason,
        )

    def shown_arguments(self, arguments: bytes | None) -> str:
        """The arguments as a person is shown them: compact JSON, secrets masked."""
        if not arguments:
            return "{}"
        try:
            value = msgspec.json.decode(arguments)
        except msgspec.DecodeError:
            return "(not valid JSON)"
        except RecursionError:
            return "(nested too deeply to show)"
        text = _encode(self.secrets.mask_value(value)).decode()
        if len(text) > MAX_SHOWN:
            text = text[:MAX_SHOWN] + f"… ({len(text) - MAX_SHOWN} more characters)"
        return text

    async def ask(
        self,
        facts: CallFacts,
        agent: AgentInfo,
        kin: FindKin,
        decision: Decision,
        arguments: bytes | None,
        agent_answer: AgentAnswer | None = None,
        kept: int = 0,
    ) -> Verdict | Decision:
        """Wait for a person's decision on an ``ask`` call, which keeps ``kept`` bytes
        meanwhile. ``agent_answer`` asks the agent's user (``asking``) while the
        operator can decide too. The person's verdict; or the rules' decision, a
        ``deny``, when a reload made them refuse the call while it waited. An approval
        is not remembered here: it is not known yet to stand (``stands``)."""
        if self.approvals.remembered(agent.connection, decision.rule, facts.server, facts.original):
            return Verdict("approved", REMEMBERED)
        request = self.request(facts, agent, await kin(), decision, arguments)
        waiting = _Waiting(self, facts)
        try:
            verdict = await self.approvals.ask(
                request, decision.timeout, agent_answer, kept, waiting.overrule
            )
        except ApprovalError as exc:
            return Verdict("unanswered", "mcpd", str(exc))
        return verdict if waiting.ruled is None else waiting.ruled

    def stands(self, facts: CallFacts, agent: AgentInfo, asked: Decision) -> Decision | None:
        """Whether the approval of a call asked about under ``asked`` stands, its wait
        over, with ``facts`` what the rules see of its tool now: None when they decide
        it as they did (the same ``ask``: a person's approval is what it needs; kept
        for the connection when the rule says so); else their decision now, its rate
        counted as any call's is."""
        if self.policy.decide(facts) != asked:
            return self.decide(facts, agent)
        if asked.remember:
            self.approvals.remember(agent.connection, asked.rule, facts.server, facts.original)
        return None


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
