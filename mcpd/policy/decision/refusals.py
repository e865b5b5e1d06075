"""What a model reads when the policy stops a call: a tool result that says it was
policy, not an outage, why, and what to do instead. Its ``_meta["mcpd/policy"]``
carries the same for programs."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Any, Final

from protocol.mcp import core as mcp

from ..waiting.approvals import TIMEOUT, Verdict
from .rates import SLACK
from .rules import CallFacts, Decision

META_KEY: Final = "mcpd/policy"
REPEATED_BY: Final = "mcpd"  # who refuses an ask whose arguments cannot be shown


def _result(text: str, meta: dict[str, Any]) -> mcp.CallToolResult:
    shown = {k: v for k, v in meta.items() if v is not None}
    return mcp.text_result(text, is_error=True, meta={META_KEY: shown})


def denied(facts: CallFacts, decision: Decision) -> mcp.CallToolResult:
    """A ``deny`` rule matched."""
    why = f": {decision.reason}" if decision.reason else ""
    text = (
        f"mcpd's policy does not allow calls to '{facts.name}' (rule {decision.by}){why}. "
        "This is a rule of the person who runs mcpd, not an outage: calling it again is "
        "refused the same way. Try another approach, or ask the user to change mcpd's "
        "policy if this tool is needed."
    )
    meta = {"decision": "deny", "rule": decision.rule, "reason": decision.reason}
    return _result(text, meta)


def ruled_while_waiting(
    facts: CallFacts, decision: Decision, waited_for: str = "approval"
) -> mcp.CallToolResult:
    """A call the rules, changed while it waited (for a person, or for a free slot at
    its server: ``waited_for``), now deny."""
    why = f": {decision.reason}" if decision.reason else ""
    text = (
        f"mcpd's policy changed while the call to '{facts.name}' waited for {waited_for}, and "
        f"now does not allow calls to it (rule {decision.by}){why}. It was not sent to the "
        "server. This is a rule of the person who runs mcpd, not an outage: calling it "
        "again is refused the same way. Try another approach, or ask the user to change "
        "mcpd's policy if this tool is needed."
    )
    meta = {
        "decision": "deny",
        "rule": decision.rule,
        "reason": decision.reason,
        "changed": "policy",
    }
    return _result(text, meta)


def changed_while_waiting(
    facts: CallFacts, decision: Decision, verdict: Verdict, how: str
) -> mcp.CallToolResult:
    """An ``ask`` call approved after its tool changed (``how``: gone, held, or defined
    anew): what was approved is not what would be called."""
    text = (
        f"The call to '{facts.name}' was approved by {verdict.by}, but the tool changed "
        f"while the call waited for approval: {how}. mcpd did not send it, as what was "
        "approved is not what the server would now be asked to do. List the tools again "
        "to see them as they are now, and call it again only if it still fits: mcpd's "
        "policy decides that call anew."
    )
    meta = {
        "decision": verdict.outcome,
        "rule": decision.rule,
        "reason": how,
        "by": verdict.by,
        "changed": "tool",
    }
    return _result(text, meta)


def changed_before_sent(
    name: str, how: str, decision: str, by: str, waited_for: str
) -> mcp.CallToolResult:
    """A call to ``name``, let through (``decision`` by ``by``), whose tool changed
    (``how``: gone, held, defined anew) while it waited (for a free slot at its server,
    or for the answers its server asked for: ``waited_for``) to be sent."""
    text = (
        f"The tool '{name}' changed while the call to it waited for {waited_for}: {how}. "
        "mcpd did not send it. List the tools again to see them as they are now, and call "
        "it again only if it still fits: mcpd's policy decides that call anew."
    )
    meta = {"decision": decision, "reason": how, "by": by, "changed": "tool"}
    return _result(text, meta)


def limited(facts: CallFacts, decision: Decision) -> mcp.CallToolResult:
    """The rule's rate refused the call (``decision.limited`` is set)."""
    assert decision.rate is not None and decision.limited is not None
    wait = decision.limited
    # Whole seconds, rounded up: an agent that calls again at the time it is told
    # is let through, not refused again a fraction of a second early.
    at = math.ceil(time.time() + wait - SLACK)
    text = (
        f"mcpd's policy lets each agent call '{facts.name}' at most "
        f"{decision.rate.words()} (rule {decision.by}), and this agent has reached that. "
        f"It may call it again in {max(1, math.ceil(wait - SLACK))} s (at "
        f"{datetime.fromtimestamp(at).strftime('%H:%M:%S')}). This is a limit, not an "
        "outage: the call was not sent, and other tools keep working."
    )
    meta = {
        "decision": "limited",
        "rule": decision.rule,
        "reason": decision.reason,
        "retry_at": datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds"),
    }
    return _result(text, meta)


def repeated_key(facts: CallFacts, decision: Decision, key: str) -> mcp.CallToolResult:
    """An ``ask`` call whose arguments give ``key`` (written out) more than once: refused
    before anyone is asked."""
    return _unshowable(
        facts,
        decision,
        f"its arguments give the key '{key}' more than once",
        "with a key given twice they could be shown one value while the server uses the "
        "other. Call it again with each key given once.",
        f"the key '{key}' is given more than once",
    )


def unshowable(facts: CallFacts, decision: Decision, why: str) -> mcp.CallToolResult:
    """An ``ask`` call whose arguments cannot be shown to a person as the server will
    read them (``why``): refused before anyone is asked, as a repeated key is."""
    return _unshowable(
        facts,
        decision,
        f"its arguments cannot be shown as the server will read them ({why})",
        "what cannot be shown cannot be approved. Call it again with plain JSON arguments.",
        f"the arguments cannot be shown: {why}",
    )


def _unshowable(
    facts: CallFacts, decision: Decision, what: str, why: str, reason: str
) -> mcp.CallToolResult:
    """An ``ask`` call refused before anyone is asked: a person could not be shown its
    arguments as the server will read them."""
    text = (
        f"mcpd did not send the call to '{facts.name}', nor ask anyone about it: {what}. "
        f"mcpd's policy (rule {decision.by}) has a person approve this call from its "
        f"arguments, and {why}"
    )
    meta = {"decision": "denied", "rule": decision.rule, "reason": reason, "by": REPEATED_BY}
    return _result(text, meta)


def not_approved(
    facts: CallFacts, decision: Decision, verdict: Verdict, in_force: bool = True
) -> mcp.CallToolResult:
    """An ``ask`` that ended without an approval; ``in_force``: the rules decide the call
    as ``decision`` still (a reload while it waited may have changed them, and another
    rule may have its place in the list now)."""
    rule = f"rule {decision.by}"
    if not in_force:
        rule += " of the rules as they were when it was called; a reload has changed them since"
    if verdict.outcome == "unanswered" and verdict.by == TIMEOUT:
        text = (
            f"Nobody approved the call to '{facts.name}' within {decision.timeout:g} s "
            f"(mcpd's policy asked a person first: {rule}), so it was not sent to the "
            "server. Tell the user it waits for their approval; call it again when they "
            "are there to approve it."
        )
    elif verdict.outcome == "unanswered":
        text = (
            f"mcpd's policy asked a person before calling '{facts.name}' ({rule}), and "
            f"this call could not wait for one: {verdict.reason}. It was not sent to the "
            "server."
        )
    else:
        why = f": {verdict.reason}" if verdict.reason and verdict.reason != "denied" else ""
        text = (
            f"The call to '{facts.name}' was denied by {verdict.by}{why}. It was not sent "
            "to the server. Do not call it again unless the user asks for it."
        )
    meta = {
        "decision": verdict.outcome,
        "rule": decision.rule,
        "reason": verdict.reason,
        "by": verdict.by,
    }
    return _result(text, meta)
