"""The policy as the call path meets it: one decision for each call, and for the
calls a person decides, the wait.

``decide`` runs the rules, then the matched rule's rate limit for the calling agent;
``ask`` holds an ``ask`` call in the approvals registry (or lets it through when an
approval was remembered for the connection). What the model reads when a call is
refused is built by ``refusals``.

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
        """The config's rules, at start and after each reload."""
        # Approvals and rates are kept under their rule's index: once the rules differ,
        # that index may name another rule, one the person never approved anything
        # under, or whose calls were never counted.
        if tuple(rules) != self._rules:
            self.approvals.forget_all()
            self.rates = RateLimits()
        self._rules = tuple(rules)
        self.policy = Policy(rules)
        # No rules: every call is allowed, and nothing about it need be looked up.
        self.empty = self.policy.empty

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
    ) -> Verdict:
        """Wait for a person's decision on an ``ask`` call, which keeps ``kept`` bytes
        meanwhile. ``agent_answer`` asks the agent's user (``asking``) while the
        operator can decide too."""
        connection = agent.connection
        if self.approvals.remembered(connection, decision.rule, facts.server, facts.original):
            return Verdict("approved", REMEMBERED)
        request = self.request(facts, agent, await kin(), decision, arguments)
        try:
            verdict = await self.approvals.ask(request, decision.timeout, agent_answer, kept)
        except ApprovalError as exc:
            return Verdict("unanswered", "mcpd", str(exc))
        if verdict.approved and decision.remember:
            self.approvals.remember(connection, decision.rule, facts.server, facts.original)
        return verdict
