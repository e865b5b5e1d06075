"""The policy's decision for one call: the first ``[[policy]]`` rule that matches it
decides; a call no rule matches is allowed. Pure: the facts of the call in, a
``Decision`` out. Rate limits (``rates``) come after, for what a rule let through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from protocol.mcp import core as mcp

from ...config.tables.glob import Glob
from ...config.tables.policy import Action, PolicyRule, Rate, parse_rate
from ...registry.naming.facing import spellings
from ...registry.tables.shown import Entry

# The hints of a tool as a model is told to take them when its server is not trusted,
# which are also what the spec says an absent hint means.
CAUTIOUS: Final[Mapping[str, bool]] = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}


def hints_of(annotations: Mapping[str, object] | None, trusted: bool) -> dict[str, bool]:
    """The hints a rule sees: the tool's own only when its server is trusted."""
    hints = dict(CAUTIOUS)
    if trusted and annotations:
        for key in hints:
            value = annotations.get(key)
            if isinstance(value, bool):
                hints[key] = value
    return hints


class CallFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What a rule can be about. ``name`` is the tool's name as the agent called it
    (under its profile's naming); ``other_names`` are the tool's other local names
    (``Entry.other_names``: under the daemon's naming and the default profile's, and
    before any hash); ``original`` is the server's own name for it. ``derived_from``:
    the profile that ``profile`` shows under other names (a host's built-in profile
    shows the default's), whose rules are about its agents too. ``tool``: the tool as
    the profile lists it, whose definition an approval remembered is of
    (``gate.defined``); no rule reads it."""

    name: str
    server: str
    original: str
    profile: str
    other_names: tuple[str, ...] = ()
    derived_from: str | None = None
    annotations: dict[str, Any] | None = None
    trusted: bool = False
    tool: mcp.Tool | None = None


def facts_of(entry: Entry, profile: str, trusted: bool, derived_from: str | None) -> CallFacts:
    """The facts of a call to a listed tool, as an agent of ``profile`` calls it
    (``derived_from``: the profile it is a view of, given at every call so that no
    decision forgets the rules about that one)."""
    annotations = entry.tool.annotations
    return CallFacts(
        name=entry.local,
        server=entry.alias,
        original=entry.original,
        profile=profile,
        other_names=entry.other_names,
        derived_from=derived_from,
        annotations=annotations if isinstance(annotations, dict) else None,
        trusted=trusted,
        tool=entry.tool,
    )


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    action: Action
    rule: int | None = None  # the rule's index; None: no rule matched
    reason: str | None = None
    rate: Rate | None = None
    timeout: float = 120.0  # ask: how long a person has to decide
    remember: bool = False  # ask: an approval holds for the rest of the connection
    operator_only: bool = False  # ask: the calling agent is never asked, only the operator
    # Set when the rule's rate refused the call: seconds until the agent may call again.
    limited: float | None = None

    @property
    def by(self) -> str:
        """Who decided, for the record: ``policy[2]``, or ``default``."""
        return "default" if self.rule is None else f"policy[{self.rule}]"

    def summary(self) -> dict[str, str | int | None]:
        """What ``mcpd tools --policy`` shows of it."""
        out: dict[str, str | int | None] = {"action": self.action, "rule": self.rule, "by": self.by}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.rate is not None:
            out["rate"] = self.rate.words()
        if self.operator_only:
            out["decider"] = "operator"
        return out


ALLOW: Final = Decision(action="allow")


class _Rule:
    __slots__ = ("decision", "hints", "profiles", "servers", "tools")

    def __init__(self, index: int, rule: PolicyRule) -> None:
        self.tools = [Glob(p) for p in rule.tools]
        self.servers = [Glob(p) for p in rule.servers]
        self.profiles = [Glob(p) for p in rule.profiles]
        self.hints = rule.annotations.wanted() if rule.annotations is not None else {}
        self.decision = Decision(
            action=rule.action,
            rule=index,
            reason=rule.reason,
            rate=parse_rate(rule.rate) if rule.rate is not None else None,
            timeout=rule.ask_timeout(),
            remember=rule.remember == "connection",
            operator_only=rule.decider == "operator",
        )

    def matches(self, facts: CallFacts, names: tuple[str, ...]) -> bool:
        """``names``: every name the tool has for the call (``Policy.decide``)."""
        if self.servers and not _any(self.servers, facts.server):
            return False
        if self.profiles and not (
            _any(self.profiles, facts.profile)
            or (facts.derived_from is not None and _any(self.profiles, facts.derived_from))
        ):
            return False
        if not any(glob.match(name) for glob in self.tools for name in names):
            return False
        if self.hints:
            hints = hints_of(facts.annotations, facts.trusted)
            return all(hints[k] == v for k, v in self.hints.items())
        return True


def _any(globs: list[Glob], text: str) -> bool:
    return any(glob.match(text) for glob in globs)


class Policy:
    """The config's rules, compiled once (at start and on each reload)."""

    def __init__(self, rules: Sequence[PolicyRule] = ()) -> None:
        self._rules = [_Rule(i, r) for i, r in enumerate(rules)]

    @property
    def empty(self) -> bool:
        """No rules: every call is allowed, and nothing about it need be looked up."""
        return not self._rules

    def decide(self, facts: CallFacts) -> Decision:
        # Every name the tool has for this call: a rule written against one naming
        # holds under every other, and a look-alike that gets the tool's name hashed
        # does not take it out of the rule. A rule that denies or asks matches
        # ``ALIAS/NAME`` by what agents know the tool as too, so that a server renaming
        # it to a look-alike does not escape the rule; one that allows matches the
        # server's own name only, as that reading would allow the look-alikes too.
        server = facts.server
        own = (facts.name, f"{server}/{facts.original}", *facts.other_names)
        wide = own + tuple(f"{server}/{form}" for form in spellings(facts.original)[1:])
        for rule in self._rules:
            if rule.matches(facts, own if rule.decision.action == "allow" else wide):
                return rule.decision
        return ALLOW
