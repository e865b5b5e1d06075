"""The policy's step on the call path: the ``[[policy]]`` rules' decision for a routed
tools/call, and for an ``ask`` the wait for a person's answer.

``decide`` runs where calls are routed (``toolcall.Router.route``), direct calls and
search mode's meta-calls alike, once the tool is known and not held: an allowed call
goes on, a denied or rate-limited one ends there with a result a model can read, and
one to ask about goes on in a task (``Ask``). ``ask`` runs in that task before the
call is started at its server, so the wait holds no slot there and no breaker hears
of it. It asks the agent's user through the agent when the agent can be asked (an
``elicitation/create`` of mcpd's own to a legacy agent, an ``input_required`` to a
modern one, through the same askers that carry a server's questions) while the
operator can decide with ``mcpd approvals`` or on the status page; whoever answers
first decides, and a call nobody decides in time is refused. One whose arguments
cannot be shown as the server will read them (a key given twice, a number past what a
double holds) is refused before anyone is asked (``gate.CallGate.shown``).

An approval is for the call as it was when the person was asked. Once the wait ends in
one, the call is looked at again before it is sent: its tool as the agent's profile
lists it now (gone, held, or defined anew: refused, saying it changed while the call
waited), then the rules as they are now (``CallGate.stands``): the same ``ask`` keeps
the approval, ``allow`` sends it, ``deny`` refuses it, and another rule's ``ask``
asks again. The same task waits and looks again whichever era the agent speaks, so a
modern agent's retry that brings the approval meets the same look.

A call let through (allowed, or approved) may still wait for a free slot at its
server. Those are looked at again when a reload puts other rules or profiles in force
and when their server's tools change (``QueuedCalls``, which the servers' queues are
walked with then, and only then): one whose tool is gone or held, or that the rules
now deny, ends unsent, saying so.

A call whose server answers ``input_required`` goes to it again once its agent has
answered (``askback.rounds.legacy_rounds``; a modern agent's retry, ``resumes``), which may be
long after it was let through. Each time it is looked at again first (``again``),
against what it was last sent under (``Sent``): its tool as listed now, then the rules
now, as a call approved after its wait is.
"""

from __future__ import annotations

from typing import Final

import msgspec
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features

from ...policy.agent import AgentInfo
from ...policy.deciders.kin import AgentKin
from ...policy.decision import refusals
from ...policy.decision.gate import CallGate, FindKin, WaitOpened
from ...policy.decision.rules import ALLOW, CallFacts, Decision, facts_of
from ...policy.shown.reading import RepeatedKey, Unshowable
from ...policy.waiting import asking
from ...policy.waiting.approvals import ApprovalRequest, Verdict
from ...registry.tables.shown import Entry
from ...servers.shared import Asker, Call, QueuedCheck
from ..agent import AgentCall, Sent
from ..askback.askers import Park, Parks
from ..profiles import Profile, Profiles

# What a call let through waited for when it is looked at again: a slot at its server,
# or its agent's answers to what its server asked (to be sent again with them).
QUEUED: Final = "a free slot at its server"
ANSWERS: Final = "the answers to what its server asked"
# What is asked does not change whether an agent takes it: its shape does.
_PROBE: Final = ApprovalRequest(
    agent=AgentInfo(), kin=AgentKin(), tool="", server="", original="", arguments="{}"
)


class Ask(msgspec.Struct, frozen=True):
    """A call the policy says to ask a person about: what the rules saw, the rule, the
    bytes the call keeps while it waits, and the tool and profile it was routed
    through, to look at again once it is approved."""

    facts: CallFacts
    decision: Decision
    entry: Entry
    profile: Profile
    kept: int = 0


class CallPolicy:
    def __init__(self, gate: CallGate, parks: Parks) -> None:
        self.gate = gate
        self._parks = parks

    def decide(
        self, call: AgentCall, entry: Entry, profile: Profile, agent: AgentInfo
    ) -> mcp.CallToolResult | Ask | Sent:
        """What the rules say of ``call`` to the listed tool ``entry``: what it goes to
        its server under when it may go, the result it ends with when it may not, or
        ``Ask``."""
        gate = self.gate
        facts = _facts(entry, profile)
        decision = gate.decide(facts, agent)
        call.decision, call.decided_by = decision.action, decision.by
        if decision.action == "allow":
            return Sent(entry, profile, decision)
        if decision.action == "ask":
            return Ask(facts, decision, entry, profile, call.out.kept_apart())
        why = f": {decision.reason}" if decision.reason else ""
        if decision.limited is not None:
            call.decision = "limited"
            call.refusal = f"over the rate of {decision.by}"
            return refusals.limited(facts, decision)
        call.refusal = f"denied by {decision.by}{why}"
        return refusals.denied(facts, decision)

    def continues(self, call: AgentCall) -> bool:
        """Whether ``call`` answers what mcpd asked its agent for another call (its
        ``requestState`` is mcpd's): that call met the rules, and this one only brings
        the answer. While that call waits, this one's record is that call's; once it
        is over, this one is refused with an error of its own."""
        found = self._parks.find(call.out.request_state)
        if found is None:
            return False
        # Another agent's token, or one for another tool or other arguments, is refused
        # by the driver: that refusal is this call's record.
        if isinstance(found, Park) and found.flow.taken_by(
            call.out.owner, "tools/call", call.out.name, call.out.arguments
        ):
            call.recorded = True
        return True

    async def ask(
        self,
        call: AgentCall,
        agent: AgentInfo,
        kin: FindKin,
        ask: Ask,
        asker: Asker | None,
        told: WaitOpened | None = None,
    ) -> mcp.CallToolResult | Sent:
        """Wait for a person's decision on ``call`` (of ``agent``, whose ``kin`` may not
        decide it): what it is sent under once it is approved, else the result it ends
        with. ``told``: told the id it waits under (``CallGate.ask``)."""
        arguments = call.out.arguments
        # Refused before anyone is asked, an approval remembered too: what a person
        # approves is the arguments as shown, and the server must read them so.
        try:
            shown = await self.gate.shown(arguments if isinstance(arguments, Raw) else None)
        except Unshowable as exc:
            call.decision, call.decided_by = "denied", refusals.REPEATED_BY
            if isinstance(exc, RepeatedKey):
                call.refusal = (
                    f"denied by mcpd: the arguments give the key '{exc.key}' more than once"
                )
                return refusals.repeated_key(ask.facts, ask.decision, exc.key)
            call.refusal = f"denied by mcpd: the arguments cannot be shown ({exc})"
            return refusals.unshowable(ask.facts, ask.decision, str(exc))
        version = call.out.ctx.version
        # Asked only when it declared it takes elicitation (a form, for this version).
        probe = asking.elicitation_params(_PROBE, version)
        declares = asker is not None and features.declares(
            call.out.ctx.capabilities, asking.METHOD, probe
        )

        async def agent_answer(request: ApprovalRequest) -> Verdict | None:
            assert asker is not None
            params = asking.elicitation_params(request, version)
            try:
                answer = await asker.ask(asking.METHOD, params)
            except rpc.RPCError:
                return None  # it cannot answer after all (it left, or refused)
            given = answer if isinstance(answer, Raw) else Raw(b"null")
            return asking.verdict_of(given, asking.may_approve(request))

        while True:
            # The rule decides whether an agent's user may decide.
            answer = agent_answer if declares and not ask.decision.operator_only else None
            verdict = await self.gate.ask(
                ask.facts, agent, kin, ask.decision, shown, answer, ask.kept, told
            )
            if isinstance(verdict, Decision):  # a reload's rules deny it: it waits no more
                return _ruled(call, ask.facts, verdict)
            call.decision, call.decided_by = verdict.outcome, verdict.by
            if not verdict.approved:
                why = f": {verdict.reason}" if verdict.reason else ""
                call.refusal = f"{verdict.outcome} by {verdict.by}{why}"
                in_force = self.gate.still(ask.facts, ask.decision)
                return refusals.not_approved(ask.facts, ask.decision, verdict, in_force)
            after = self._looked_again(call, agent, ask, verdict)
            if not isinstance(after, Ask):
                return after
            ask = after

    def _looked_again(
        self, call: AgentCall, agent: AgentInfo, ask: Ask, verdict: Verdict
    ) -> mcp.CallToolResult | Ask | Sent:
        """``call``, approved (``verdict``) after it waited under ``ask``, looked at
        again: what it is sent under, the result it ends with, or ``Ask`` when another
        rule now asks a person about it."""
        entry = _as_listed(ask.profile, ask.entry)
        if isinstance(entry, str):
            call.refusal = (
                f"{verdict.outcome} by {verdict.by}, but the tool changed while the call "
                f"waited: {entry}"
            )
            return refusals.changed_while_waiting(ask.facts, ask.decision, verdict, entry)
        facts = _facts(entry, ask.profile)
        now = self.gate.stands(facts, agent, ask.decision, verdict.lasting)
        if now is not None and now.action == "ask":  # another rule's: a person decides
            return Ask(facts, now, entry, ask.profile, ask.kept)
        return _going(
            call, facts, Sent(entry, ask.profile, ask.decision if now is None else now), "approval"
        )

    def allowed_as(self, call: AgentCall, profile: Profile) -> Sent | None:
        """What ``call``, sent without a task (allowed, nobody asked), went under, as far
        as its tool in ``profile`` and the rules now tell: None when either changed
        since (its retry is then a call of its own, which meets the rules anew)."""
        entry = profile.lookup(call.out.name) if profile.name == call.profile else None
        if entry is None or entry.held is not None:
            return None
        if (entry.alias, entry.original) != (call.out.alias, call.out.original):
            return None
        gate = self.gate
        if gate.empty:
            return Sent(entry, profile, ALLOW)
        decision = gate.policy.decide(_facts(entry, profile))
        return Sent(entry, profile, decision) if decision.action == "allow" else None

    async def again(
        self,
        call: AgentCall,
        agent: AgentInfo,
        kin: FindKin,
        sent: Sent,
        asker: Asker | None,
        told: WaitOpened | None = None,
    ) -> mcp.CallToolResult | Sent:
        """``call``, sent under ``sent``, about to go to its server again with what its
        agent answered: looked at as a call approved after a wait is. Its tool as
        listed now (gone, held or defined anew: refused), then the rules now: the same
        decision lets it go (an approval stands), another ``ask`` asks a person again,
        a ``deny`` or a rate refuses it. What it is sent under now, or the result it
        ends with, unsent."""
        entry = _as_listed(sent.profile, sent.entry)
        if isinstance(entry, str):
            return _changed(call, entry, ANSWERS)
        facts = _facts(entry, sent.profile)
        now = self.gate.stands(facts, agent, sent.decision, lasting=False)
        if now is not None and now.action == "ask":
            ask = Ask(facts, now, entry, sent.profile, call.out.kept_apart())
            asked = await self.ask(call, agent, kin, ask, asker, told)
            if isinstance(asked, Sent):  # still the same call's rounds
                return msgspec.structs.replace(asked, rounds=sent.rounds)
            return asked
        decision = sent.decision if now is None else now
        return _going(call, facts, Sent(entry, sent.profile, decision, sent.rounds), ANSWERS)


class QueuedCalls(QueuedCheck):
    """Calls let through that wait for a free slot at their server, looked at again
    when what let them through changes (a reload's rules and profiles, their server's
    tools): one whose tool is gone or held, or that the rules now deny, is refused
    before it is sent, as a call that waited for a person is once its wait ends."""

    def __init__(self, gate: CallGate, profiles: Profiles) -> None:
        self._gate = gate
        self._profiles = profiles

    def refusal(self, queued: Call) -> mcp.CallToolResult | None:
        call = queued.caller
        if not isinstance(call, AgentCall):  # every call queued is the agent side's
            return None
        profile = self._profiles.get(call.profile)
        if profile is None:
            return _changed(call, "its profile is no longer configured")
        entry = _listed(profile, queued.name, queued.alias, queued.original)
        if isinstance(entry, str):
            return _changed(call, entry)
        gate = self._gate
        if gate.empty:
            return None
        facts = _facts(entry, profile)
        # What the rules say, not counted against a rate: the call was counted once.
        decision = gate.policy.decide(facts)
        if decision.action != "deny":
            return None
        return _ruled(call, facts, decision, QUEUED)


def _changed(call: AgentCall, how: str, waited_for: str = QUEUED) -> mcp.CallToolResult:
    """``call``, let through, refused before it was sent (again): its tool changed
    (``how``) while it waited (``waited_for``)."""
    let = "allowed" if call.decision == "allow" else call.decision
    call.refusal = f"{let} by {call.decided_by}, but the tool changed while the call waited: {how}"
    return refusals.changed_before_sent(
        call.out.name, how, call.decision, call.decided_by, waited_for
    )


def _listed(profile: Profile, local: str, alias: str, original: str) -> Entry | str:
    """The tool ``original`` of the server ``alias`` as ``profile`` lists it now under
    the name ``local``; or, when that name is not for it or it is held, how it changed."""
    now = profile.lookup(local)
    if now is None:
        return "it is no longer listed"
    if (now.alias, now.original) != (alias, original):
        return "its name now stands for another tool"
    if now.held is not None:
        return f"it is held: {now.held}"
    return now


def _as_listed(profile: Profile, before: Entry) -> Entry | str:
    """The tool a person approved a call to (``before``) as ``profile`` lists it now,
    under the name the call was made by; or, when that is not the tool the call was
    made to, how it changed."""
    now = _listed(profile, before.local, before.alias, before.original)
    if isinstance(now, Entry) and now.tool != before.tool:
        return "its definition is no longer the one it had when the call was made"
    return now


def _going(
    call: AgentCall, facts: CallFacts, sent: Sent, waited_for: str
) -> mcp.CallToolResult | Sent:
    """``call``, looked at again after it waited (``waited_for``), under ``sent``: its
    decision as the rules make it now (an ``ask`` only when it is the one a person
    approved). ``sent`` when it may go, else the result it ends with."""
    decision = sent.decision
    if decision.action == "ask":
        return sent
    call.decision, call.decided_by = decision.action, decision.by
    if decision.action == "allow":
        return sent
    if decision.limited is not None:
        call.decision, call.refusal = "limited", f"over the rate of {decision.by}"
        return refusals.limited(facts, decision)
    return _ruled(call, facts, decision, waited_for)


def _facts(entry: Entry, profile: Profile) -> CallFacts:
    trusted = profile.view.registry.server_flags(entry.alias)[0]
    return facts_of(entry, profile.name, trusted, profile.derived_from)


def _ruled(
    call: AgentCall, facts: CallFacts, decision: Decision, waited_for: str = "approval"
) -> mcp.CallToolResult:
    """``call`` refused by the rules, changed while it waited (for a person, or for
    its server: ``waited_for``)."""
    why = f": {decision.reason}" if decision.reason else ""
    call.decision, call.decided_by = decision.action, decision.by
    call.refusal = f"denied by {decision.by} (the rules changed while the call waited){why}"
    return refusals.ruled_while_waiting(facts, decision, waited_for)
