"""What a model reads when the policy stops a call, and what a program reads in its
``_meta``: a denial, a rate limit with when the call may be made again (never a time at
which it would be refused again), each way an ``ask`` can end without approval, and
an approved call refused as its tool or the rules changed while it waited."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from mcpd.config.tables.policy import Rate
from mcpd.policy.decision import refusals
from mcpd.policy.decision.refusals import META_KEY
from mcpd.policy.decision.rules import CallFacts, Decision
from mcpd.policy.waiting.approvals import TIMEOUT, Verdict
from protocol.mcp import core as mcp

FACTS = CallFacts(name="mcp__github__merge", server="github", original="merge", profile="default")
# A wall clock that is not on a whole second, as it almost never is.
NOW = 1_800_000_000.7


def text_of(result: mcp.CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, mcp.TextContent)
    return content.text


def meta_of(result: mcp.CallToolResult) -> dict[str, Any]:
    assert isinstance(result.meta, dict)
    meta = result.meta[META_KEY]
    assert isinstance(meta, dict)
    return meta


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(refusals.time, "time", lambda: NOW)


def test_a_denial_says_policy_not_outage_with_the_rule_and_its_reason() -> None:
    decision = Decision(action="deny", rule=2, reason="merging is done by people")
    result = refusals.denied(FACTS, decision)
    assert result.isError is True
    text = text_of(result)
    assert "does not allow calls to 'mcp__github__merge' (rule policy[2])" in text
    assert ": merging is done by people." in text and "not an outage" in text
    assert meta_of(result) == {"decision": "deny", "rule": 2, "reason": "merging is done by people"}


def test_a_denial_without_a_reason_leaves_it_out_of_text_and_meta() -> None:
    result = refusals.denied(FACTS, Decision(action="deny", rule=0))
    assert "(rule policy[0]). This is a rule" in text_of(result)
    assert meta_of(result) == {"decision": "deny", "rule": 0}


def limited(wait: float, rate: Rate | None = None) -> mcp.CallToolResult:
    decision = Decision(action="deny", rule=1, rate=rate or Rate(1, 60.0), limited=wait)
    return refusals.limited(FACTS, decision)


def told_wait(result: mcp.CallToolResult) -> int:
    text = text_of(result)
    return int(text.split("may call it again in ", 1)[1].split(" s", 1)[0])


def retry_at(result: mcp.CallToolResult) -> float:
    return datetime.fromisoformat(meta_of(result)["retry_at"]).timestamp()


@pytest.mark.usefixtures("wall")
@pytest.mark.parametrize("wait", [0.0001, 0.4, 1.0, 1.4, 2.5, 37.11, 59.999, 3600.0, 86399.3])
def test_a_rate_limit_never_tells_a_time_at_which_the_call_is_refused_again(wait: float) -> None:
    result = limited(wait)
    assert told_wait(result) >= wait
    assert told_wait(result) < wait + 1
    assert retry_at(result) >= NOW + wait
    assert retry_at(result) < NOW + wait + 1


@pytest.mark.usefixtures("wall")
def test_a_rate_limit_says_the_rule_its_rate_and_that_it_is_not_an_outage() -> None:
    result = limited(12.0, Rate(30, 60.0))
    text = text_of(result)
    assert result.isError is True
    assert "at most 30 calls a minute (rule policy[1])" in text
    assert "in 12 s" in text and "not an outage" in text and "other tools keep working" in text
    meta = meta_of(result)
    assert (meta["decision"], meta["rule"]) == ("limited", 1)
    assert "reason" not in meta
    # The clock time in the text and the one in the meta are the same moment.
    local = datetime.fromtimestamp(retry_at(result)).strftime("%H:%M:%S")
    assert f"(at {local})" in text


def test_nobody_deciding_in_time_says_to_call_again_with_the_user_there() -> None:
    decision = Decision(action="ask", rule=0, timeout=300.0)
    verdict = Verdict("unanswered", TIMEOUT, "nobody decided within 300 s")
    result = refusals.not_approved(FACTS, decision, verdict)
    text = text_of(result)
    assert "Nobody approved the call to 'mcp__github__merge' within 300 s" in text
    assert "was not sent to the server" in text
    assert meta_of(result) == {
        "decision": "unanswered",
        "rule": 0,
        "reason": "nobody decided within 300 s",
        "by": TIMEOUT,
    }


def test_a_call_that_could_not_wait_says_why() -> None:
    verdict = Verdict("unanswered", "mcpd", "32 calls of this agent already wait")
    text = text_of(refusals.not_approved(FACTS, Decision(action="ask", rule=0), verdict))
    assert "could not wait for one: 32 calls of this agent already wait." in text
    assert "Nobody approved" not in text


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        (None, "was denied by uid 1000 (alice). It was not sent"),
        ("denied", "was denied by uid 1000 (alice). It was not sent"),
        ("not on a Friday", "was denied by uid 1000 (alice): not on a Friday. It was not"),
    ],
)
def test_a_denial_by_a_person_names_them_and_their_reason(reason: str | None, shown: str) -> None:
    verdict = Verdict("denied", "uid 1000 (alice)", reason)
    result = refusals.not_approved(FACTS, Decision(action="ask", rule=3), verdict)
    text = text_of(result)
    assert shown in text and "Do not call it again unless the user asks" in text
    meta = meta_of(result)
    assert (meta["decision"], meta["by"], meta.get("reason")) == (
        "denied",
        "uid 1000 (alice)",
        reason,
    )


def test_arguments_giving_a_key_twice_are_refused_saying_which_and_what_to_do() -> None:
    result = refusals.repeated_key(FACTS, Decision(action="ask", rule=1), "mode")
    said = text_of(result)
    assert said.startswith("mcpd did not send the call to 'mcp__github__merge', nor ask")
    assert "give the key 'mode' more than once" in said and "(rule policy[1])" in said
    assert said.endswith("Call it again with each key given once.")
    assert result.isError is True
    assert meta_of(result) == {
        "decision": "denied",
        "rule": 1,
        "reason": "the key 'mode' is given more than once",
        "by": "mcpd",
    }


def test_a_call_the_rules_deny_after_it_waited_says_they_changed_meanwhile() -> None:
    decision = Decision(action="deny", rule=0, reason="merges are frozen")
    result = refusals.ruled_while_waiting(FACTS, decision)
    text = text_of(result)
    assert "policy changed while the call to 'mcp__github__merge' waited for approval" in text
    assert "(rule policy[0]): merges are frozen" in text and "not sent" in text
    assert meta_of(result) == {
        "decision": "deny",
        "rule": 0,
        "reason": "merges are frozen",
        "changed": "policy",
    }


def test_an_approved_call_whose_tool_changed_meanwhile_says_what_changed() -> None:
    verdict = Verdict("approved", "uid 0 (root)")
    how = "it is held: its definition changed since it was approved"
    result = refusals.changed_while_waiting(FACTS, Decision(action="ask", rule=1), verdict, how)
    text = text_of(result)
    assert "approved by uid 0 (root), but the tool changed while the call waited" in text
    assert how in text and "did not send it" in text
    assert meta_of(result) == {
        "decision": "approved",
        "rule": 1,
        "reason": how,
        "by": "uid 0 (root)",
        "changed": "tool",
    }
