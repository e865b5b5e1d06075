"""``[[policy]]``: who may call what. Each rule picks calls by tool, server, profile
and the tool's annotations, and says what happens to them: ``allow``, ``ask`` (a person
decides) or ``deny``. The first rule that matches a call decides it; a call no rule
matches is allowed.

``tools`` patterns are globs matched against every name the tool has for a call:
the name the agent called, its names under the daemon's naming and the default
profile's, each before any hash, and ``ALIAS/NAME`` (the server's alias and its own
name for the tool), so ``*/delete_*`` and ``mcp__github__merge_*`` both work, in every
profile. ``servers`` and ``profiles`` are globs over aliases and profile names; a
host's built-in profile is the default one under other names, so a rule about
``default`` is about it too. ``annotations`` matches the tool's hints as a trusted
server gives them; a server not marked ``trusted`` is taken at its most dangerous
(``readOnlyHint = false``, ``destructiveHint = true``, ``idempotentHint = false``,
``openWorldHint = true``) whatever it says, as agents are told.

These structs only describe; the checks are in ``checks.policy_rules`` and the decision
itself is ``mcpd.policy.decision.rules``.
"""

from __future__ import annotations

import re
from typing import Final, Literal, NamedTuple

import msgspec

from protocol.shown.stand_ins import masked_repr

Action = Literal["allow", "ask", "deny"]
Remember = Literal["connection", "none"]
# ask: who may decide. The calling agent's user, through its host, when the agent can be
# asked (else the operator); or only the operator, for a rule no agent may answer for
# itself (an agent that answers its own questions is its own user).
WhoDecides = Literal["agent_or_operator", "operator"]

DEFAULT_ASK_TIMEOUT: Final = 120.0
MAX_ASK_TIMEOUT: Final = 24 * 3600.0
MAX_REASON: Final = 500
_RATE_RE: Final = re.compile(r"\s*([0-9]+)\s*/\s*([a-z]+)\s*\Z")
_PERIODS: Final = {
    "s": 1.0, "sec": 1.0, "second": 1.0,
    "min": 60.0, "minute": 60.0,
    "h": 3600.0, "hour": 3600.0,
    "d": 86400.0, "day": 86400.0,
}  # fmt: skip
_PERIOD_WORDS: Final = {1.0: "a second", 60.0: "a minute", 3600.0: "an hour", 86400.0: "a day"}


class AnnotationMatch(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The hints a rule asks for; a hint left out may be anything."""

    readOnlyHint: bool | None = None
    destructiveHint: bool | None = None
    idempotentHint: bool | None = None
    openWorldHint: bool | None = None

    def wanted(self) -> dict[str, bool]:
        hints = {
            "readOnlyHint": self.readOnlyHint,
            "destructiveHint": self.destructiveHint,
            "idempotentHint": self.idempotentHint,
            "openWorldHint": self.openWorldHint,
        }
        return {k: v for k, v in hints.items() if v is not None}


class PolicyRule(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    tools: list[str] = msgspec.field(default_factory=lambda: ["*"])
    servers: list[str] = msgspec.field(default_factory=list)  # empty: every server
    profiles: list[str] = msgspec.field(default_factory=list)  # empty: every profile
    annotations: AnnotationMatch | None = None
    action: Action
    reason: str | None = None
    # "30/min": calls this rule lets through, for each agent.
    rate: str | None = None
    # ask: how long a person has to decide, and whether an approval holds for the
    # rest of the agent's connection.
    timeout: float | None = None
    remember: Remember | None = None
    decider: WhoDecides | None = None

    def ask_timeout(self) -> float:
        return DEFAULT_ASK_TIMEOUT if self.timeout is None else self.timeout


class Rate(NamedTuple):
    calls: int
    period: float  # seconds

    def words(self) -> str:
        per = _PERIOD_WORDS.get(self.period, f"every {self.period:g} s")
        return f"{self.calls} {'call' if self.calls == 1 else 'calls'} {per}"


def parse_rate(text: str) -> Rate:
    """``"30/min"``; raises ValueError with what is wrong."""
    m = _RATE_RE.match(text.lower())
    if m is None or m.group(2) not in _PERIODS:
        raise ValueError(
            f'{masked_repr(text)} is not a rate such as "30/min" (per s, min, h or day)'
        )
    count = int(m.group(1))
    if count < 1:
        raise ValueError(f'{masked_repr(text)} lets no call through; use action = "deny" for that')
    return Rate(count, _PERIODS[m.group(2)])


def unreachable(rules: list[PolicyRule]) -> list[str]:
    """Rules no call reaches, because an earlier one matches every call."""
    for i, rule in enumerate(rules):
        if "*" in rule.tools and not (rule.servers or rule.profiles or rule.annotations):
            return [
                f"policy[{k}] is never reached: policy[{i}] matches every call"
                for k in range(i + 1, len(rules))
            ]
    return []
