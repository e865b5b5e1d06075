"""The policy as the call path meets it: the decision for each call with its rule's
rate for the calling agent, what a person is shown of a call's arguments (masked, at a
glance and whole, whatever the agent sent, long ones read off the event loop), and the
wait for a person, with approvals remembered for a connection only as long as the
rules that granted them stand: a reload ends at once the waits its rules deny, and an
approval stands only while the rules decide its call as they did."""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec
import pytest
import trio
import trio.testing

from mcpd.config.credentials.secrets import HeldSecret
from mcpd.config.tables.policy import PolicyRule
from mcpd.policy.agent import AgentInfo
from mcpd.policy.deciders.kin import AgentKin, Process
from mcpd.policy.decision.gate import READ_HERE, REMEMBERED, CallGate, FindKin, defined
from mcpd.policy.decision.rules import CallFacts, Decision
from mcpd.policy.redaction.masking import KnownSecrets, marker
from mcpd.policy.shown.reading import RepeatedKey, Unshowable
from mcpd.policy.shown.showing import shown_arguments
from mcpd.policy.waiting.approvals import PER_AGENT, TIMEOUT, ApprovalRequest, Approvals, Verdict
from protocol.mcp import core as mcp

AGENT = AgentInfo(uid=1000, pid=4242, exe="claude", profile="default", connection="c1")
SECRET = "tok-9f8e7d6c5b4a3210"
WHERE = "servers.github.env.GITHUB_TOKEN"


async def nothing_known() -> AgentKin:
    return AgentKin()


def facts(name: str = "mcp__github__merge", original: str = "merge") -> CallFacts:
    return CallFacts(name=name, server="github", original=original, profile="default")


def gate(*rules: dict[str, Any], now: list[float] | None = None) -> CallGate:
    known = KnownSecrets()
    known.replace("config", [HeldSecret(WHERE, SECRET)])
    clock = now if now is not None else [0.0]
    g = CallGate(Approvals(), known, clock=lambda: clock[0])
    g.configure([msgspec.convert(r, PolicyRule) for r in rules])
    return g


NONE: Final = shown_arguments(None)


async def waiting(approvals: Approvals, count: int) -> None:
    while len(approvals.list()) < count:
        await approvals.wait_change(approvals.version)


# -- decisions --


def test_no_rules_allow_every_call_and_count_nothing() -> None:
    g = gate()
    assert g.empty
    for _ in range(100):
        assert g.decide(facts(), AGENT).action == "allow"
    assert len(g.rates) == 0


def test_a_rate_refuses_past_its_count_with_the_wait_and_counts_each_agent_apart() -> None:
    now = [100.0]
    g = gate({"action": "allow", "rate": "2/min"}, now=now)
    assert [g.decide(facts(), AGENT).action for _ in range(2)] == ["allow", "allow"]
    refused = g.decide(facts(), AGENT)
    assert (refused.action, refused.limited, refused.rule) == ("deny", pytest.approx(30.0), 0)
    # Another process is another agent; the same process on a new connection is not.
    assert g.decide(facts(), msgspec.structs.replace(AGENT, pid=4243)).action == "allow"
    again = msgspec.structs.replace(AGENT, connection="c2")
    assert g.decide(facts(), again).action == "deny"
    now[0] += 30.0
    assert g.decide(facts(), AGENT).action == "allow"


def test_an_ask_rule_with_a_rate_counts_the_calls_it_asks_about() -> None:
    g = gate({"action": "ask", "rate": "1/h"})
    assert g.decide(facts(), AGENT).action == "ask"
    limited = g.decide(facts(), AGENT)
    assert limited.action == "deny" and limited.limited == pytest.approx(3600.0)


def test_a_denied_call_takes_nothing_from_a_later_rules_rate() -> None:
    g = gate(
        {"action": "deny", "tools": ["*/delete_*"]},
        {"action": "allow", "rate": "1/min"},
    )
    for _ in range(10):
        assert g.decide(facts("mcp__github__delete_repo", "delete_repo"), AGENT).action == "deny"
    assert g.decide(facts(), AGENT).action == "allow"


def test_a_deny_rule_is_met_under_either_name_of_the_tool() -> None:
    # A profile may name a tool anything; the rule on the server's own name still holds.
    g = gate({"action": "deny", "tools": ["github/delete_*"]})
    for name in ("mcp__github__delete_repo", "renamed_harmless", "DELETE_REPO"):
        assert g.decide(facts(name, "delete_repo"), AGENT).action == "deny", name


# -- what a person is shown --


async def shown(g: CallGate, arguments: bytes | None) -> str:
    return (await g.shown(arguments)).glance.text


async def test_arguments_are_shown_compact_with_mcpds_secrets_masked_keys_too() -> None:
    g = gate()
    raw = json.dumps({"repo": "x", "auth": SECRET, SECRET: [1, {"t": f"Bearer {SECRET}"}]})
    text = await shown(g, raw.encode())
    assert SECRET not in text
    assert json.loads(text) == {
        "repo": "x",
        "auth": marker(WHERE),
        marker(WHERE): [1, {"t": f"Bearer {marker(WHERE)}"}],
    }


async def test_no_arguments_are_shown_as_an_empty_object() -> None:
    assert await shown(gate(), None) == "{}"


@pytest.mark.parametrize(
    ("raw", "refused", "why"),
    [
        (b"{not json", Unshowable, "not JSON"),
        (b"\xff\xfe", Unshowable, "not UTF-8"),
        (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, Unshowable, "nested too deeply"),
        # What the reader that showed arguments could not read, and a server can.
        (b'{"repo":"acme/prod","action":"delete","pad":1e400}', Unshowable, "1e400"),
        (b'{"mode":"delete","mode":"read"}', RepeatedKey, "'mode'"),
    ],
)
async def test_arguments_a_person_cannot_be_shown_as_the_server_reads_them_are_refused(
    raw: bytes, refused: type[Exception], why: str
) -> None:
    with pytest.raises(refused, match=why):
        await gate().shown(raw)


async def test_long_arguments_are_read_off_the_event_loop_and_shown_the_same() -> None:
    g = gate()
    body = "Small wording fix. " * (READ_HERE // 10)
    raw = json.dumps({"body": body, "repo": "acme/PRODUCTION-SECRETS", "auth": SECRET}).encode()
    assert len(raw) > READ_HERE
    seen = (await g.shown(raw)).glance
    assert seen == shown_arguments(raw, g.secrets.current()).glance
    assert seen.shortened and seen.text.endswith(
        f',"repo":"acme/PRODUCTION-SECRETS","auth":"{marker(WHERE)}"}}'
    )


def test_the_request_names_the_tool_both_ways_with_the_rule_and_its_reason() -> None:
    g = gate({"action": "ask", "reason": "merging needs a person"})
    f = facts("renamed_merge", "merge")
    decision = g.decide(f, AGENT)
    kin = AgentKin(agents=(Process(4242),))
    arguments = shown_arguments(b'{"pr": 7}')
    req = g.request(f, AGENT, kin, decision, arguments)
    assert req == ApprovalRequest(
        agent=AGENT,
        kin=kin,
        tool="renamed_merge",
        server="github",
        original="merge",
        arguments='{"pr":7}',
        whole=arguments.whole,
        rule=0,
        reason="merging needs a person",
    )
    assert req.whole_arguments() == '{\n  "pr": 7\n}'


# -- the wait --


async def decide_first(
    g: CallGate,
    decision: Decision,
    approve: bool,
    find: FindKin = nothing_known,
    called: CallFacts | None = None,
) -> Verdict | Decision:
    """Ask about a call of ``called`` (``facts()``) under ``decision`` and decide it
    as the operator: its verdict. An approval is then looked at again, as the call
    path does, and stands."""
    called = called if called is not None else facts()
    out: list[Verdict | Decision] = []

    async def run() -> None:
        out.append(await g.ask(called, AGENT, find, decision, NONE))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await waiting(g.approvals, 1)
        g.approvals.decide(g.approvals.list()[0].id, approve, "operator")
    verdict = out[0]
    if isinstance(verdict, Verdict) and verdict.approved:
        assert g.stands(called, AGENT, decision) is None
    return verdict


async def test_an_approval_is_remembered_only_when_the_rule_says_so(
    autojump_clock: trio.testing.MockClock,
) -> None:
    remembers = gate({"action": "ask", "remember": "connection"})
    forgets = gate({"action": "ask"})
    for g, expected in ((remembers, REMEMBERED), (forgets, TIMEOUT)):
        decision = g.decide(facts(), AGENT)
        first = await decide_first(g, decision, True)
        assert isinstance(first, Verdict) and first.approved
        assert (await g.ask(facts(), AGENT, nothing_known, decision, NONE)).by == expected


async def test_a_denial_is_never_remembered(autojump_clock: trio.testing.MockClock) -> None:
    g = gate({"action": "ask", "remember": "connection"})
    decision = g.decide(facts(), AGENT)
    denied = await decide_first(g, decision, False)
    assert isinstance(denied, Verdict) and denied.outcome == "denied"
    assert (await g.ask(facts(), AGENT, nothing_known, decision, NONE)).by == TIMEOUT


async def test_a_remembered_approval_covers_that_tool_of_that_rule_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    g = gate({"action": "ask", "remember": "connection"})
    decision = g.decide(facts(), AGENT)
    await decide_first(g, decision, True)
    other_tool = facts("mcp__github__delete_repo", "delete_repo")
    assert (await g.ask(other_tool, AGENT, nothing_known, decision, NONE)).by == TIMEOUT
    # The same tool under another name (a profile's naming) is the same tool.
    renamed = facts("gh_merge", "merge")
    assert (await g.ask(renamed, AGENT, nothing_known, decision, NONE)).by == REMEMBERED


async def test_a_remembered_approval_is_of_the_tool_as_it_was_defined(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Approving a definition is not approving its calls: the tool defined anew (taken
    with a warning, or approved with ``mcpd approve``) is asked about again."""
    g = gate({"action": "ask", "remember": "connection"})
    merge = msgspec.convert({"name": "merge", "description": "Merge a pull request."}, mcp.Tool)
    before = msgspec.structs.replace(facts(), tool=merge)
    decision = g.decide(before, AGENT)
    await decide_first(g, decision, True, called=before)
    assert (await g.ask(before, AGENT, nothing_known, decision, NONE)).by == REMEMBERED
    for worse in (
        msgspec.structs.replace(merge, description="Merge, then delete every branch."),
        msgspec.structs.replace(merge, annotations={"destructiveHint": True}),
    ):
        anew = msgspec.structs.replace(before, tool=worse)
        assert (await g.ask(anew, AGENT, nothing_known, decision, NONE)).by == TIMEOUT
    # The tool as it was (listed again, the same) is still approved.
    again = msgspec.convert({"name": "merge", "description": "Merge a pull request."}, mcp.Tool)
    same = msgspec.structs.replace(facts(), tool=again)
    assert (await g.ask(same, AGENT, nothing_known, decision, NONE)).by == REMEMBERED


async def test_who_may_not_decide_is_looked_up_only_for_a_call_that_waits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Finding the agent's processes may read /proc (an agent on the TCP endpoint): a
    call approved without waiting costs none of that."""
    g = gate({"action": "ask", "remember": "connection"})
    decision = g.decide(facts(), AGENT)
    looked: list[str] = []

    async def find() -> AgentKin:
        looked.append("looked")
        return AgentKin(agents=(Process(4242),))

    await decide_first(g, decision, True, find)
    assert looked == ["looked"]
    assert (await g.ask(facts(), AGENT, find, decision, NONE)).by == REMEMBERED
    assert looked == ["looked"]


async def test_rules_changed_by_a_reload_are_asked_again_not_answered_by_old_approvals(
    autojump_clock: trio.testing.MockClock,
) -> None:
    g = gate({"action": "ask", "remember": "connection", "tools": ["github/merge"]})
    decision = g.decide(facts(), AGENT)
    await decide_first(g, decision, True)
    assert (await g.ask(facts(), AGENT, nothing_known, decision, NONE)).by == REMEMBERED
    # The operator puts a stricter rule first: what it asks about, a person decides.
    g.configure(
        [
            PolicyRule(action="ask", reason="a person decides every call today"),
            PolicyRule(action="ask", remember="connection", tools=["github/merge"]),
        ]
    )
    stricter = g.decide(facts(), AGENT)
    assert stricter.rule == 0
    verdict = await g.ask(facts(), AGENT, nothing_known, stricter, NONE)
    assert verdict.by == TIMEOUT


async def test_a_reload_that_keeps_the_rules_keeps_what_was_approved(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rules = [PolicyRule(action="ask", remember="connection")]
    g = gate()
    g.configure(rules)
    decision = g.decide(facts(), AGENT)
    await decide_first(g, decision, True)
    g.configure(list(rules))
    assert (await g.ask(facts(), AGENT, nothing_known, decision, NONE)).by == REMEMBERED


async def test_a_reload_that_restarts_a_server_forgets_the_approvals_of_its_tools(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rules = [PolicyRule(action="ask", remember="connection")]
    g = gate()
    g.configure(rules)
    notes = CallFacts(name="mcp__notes__search", server="notes", original="search", profile="")
    decision = g.decide(facts(), AGENT)
    await decide_first(g, decision, True)
    kept = g.decide(notes, AGENT)
    g.approvals.remembered.add(AGENT.connection, kept.rule, "notes", "search", defined(notes))
    # The same rules; the github server's command or sandbox changed, so it restarts.
    g.configure(list(rules), restarted=["github"])
    assert (await g.ask(facts(), AGENT, nothing_known, decision, NONE)).by == TIMEOUT
    assert (await g.ask(notes, AGENT, nothing_known, kept, NONE)).by == REMEMBERED


async def test_an_approval_of_a_call_that_waited_across_its_servers_restart_is_for_it_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rules = [PolicyRule(action="ask", remember="connection")]
    g = gate()
    g.configure(rules)
    decision = g.decide(facts(), AGENT)
    verdicts: list[Verdict | Decision] = []

    async def call() -> None:
        verdicts.append(await g.ask(facts(), AGENT, nothing_known, decision, NONE))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        await waiting(g.approvals, 1)
        # Decided as the reload comes: the person saw the server as it ran before.
        g.approvals.decide(g.approvals.list()[0].id, True, "operator")
        g.configure(list(rules), restarted=["github"])
    [verdict] = verdicts
    assert isinstance(verdict, Verdict) and verdict.approved and not verdict.lasting
    assert g.stands(facts(), AGENT, decision, verdict.lasting) is None  # it is sent
    assert (await g.ask(facts(), AGENT, nothing_known, decision, NONE)).by == TIMEOUT


def test_a_reload_that_changes_the_rules_counts_each_rules_calls_afresh() -> None:
    merge = {"action": "allow", "rate": "1/min", "tools": ["github/merge"]}
    g = gate(merge)
    assert [g.decide(facts(), AGENT).action for _ in range(2)] == ["allow", "deny"]
    # The same rule again counts on: a reload is no way to a fresh allowance.
    g.configure([msgspec.convert(merge, PolicyRule)])
    assert g.decide(facts(), AGENT).action == "deny"
    # A new first rule of the same rate is not charged with the merges counted before.
    push = {"action": "allow", "rate": "1/min", "tools": ["github/push"]}
    g.configure([msgspec.convert(r, PolicyRule) for r in (push, merge)])
    pushed = g.decide(facts("mcp__github__push", "push"), AGENT)
    assert (pushed.action, pushed.rule) == ("allow", 0)


async def test_a_reload_ends_at_once_the_waiting_calls_its_rules_deny(
    autojump_clock: trio.testing.MockClock,
) -> None:
    g = gate({"action": "ask", "tools": ["github/*"]})
    push = facts("mcp__github__push", "push")
    out: dict[str, Verdict | Decision] = {}

    async def call(f: CallFacts) -> None:
        out[f.original] = await g.ask(f, AGENT, nothing_known, g.decide(f, AGENT), NONE)

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, facts())
        nursery.start_soon(call, push)
        await waiting(g.approvals, 2)
        g.configure(
            [
                PolicyRule(action="deny", tools=["github/merge"], reason="merges are frozen"),
                PolicyRule(action="ask", tools=["github/*"]),
            ]
        )
        # The merge waits no more; the push is still a person's to decide.
        [left] = g.approvals.list()
        assert left.original == "push"
        g.approvals.decide(left.id, True, "operator")
    assert trio.current_time() == start
    ruled = out["merge"]
    assert isinstance(ruled, Decision)
    assert (ruled.action, ruled.by, ruled.reason) == ("deny", "policy[0]", "merges are frozen")
    assert out["push"] == Verdict("approved", "operator")


def test_an_approval_stands_only_while_the_rules_decide_the_call_as_they_did() -> None:
    asks = {"action": "ask", "tools": ["github/merge"], "remember": "connection"}
    g = gate(asks)
    asked = g.decide(facts(), AGENT)
    assert g.stands(facts(), AGENT, asked) is None
    # A rule for other calls changes nothing for this one.
    g.configure([msgspec.convert(r, PolicyRule) for r in (asks, {"action": "deny"})])
    assert g.stands(facts(), AGENT, asked) is None
    for rule, action in [
        ({"action": "allow"}, "allow"),
        ({"action": "deny", "reason": "frozen"}, "deny"),
        ({**asks, "decider": "operator"}, "ask"),
    ]:
        g.configure([msgspec.convert(rule, PolicyRule)])
        now = g.stands(facts(), AGENT, asked)
        assert now is not None and now.action == action


async def test_an_approval_given_across_a_reload_is_not_kept_for_the_rule_now_at_its_index(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Approvals are remembered under their rule's index: one a person gave after a
    reload put another rule there must not answer that rule's calls."""
    g = gate({"action": "ask", "tools": ["github/merge"], "remember": "connection"})
    asked = g.decide(facts(), AGENT)
    verdicts: list[Verdict | Decision] = []

    async def call() -> None:
        verdicts.append(await g.ask(facts(), AGENT, nothing_known, asked, NONE))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        await waiting(g.approvals, 1)
        g.configure([PolicyRule(action="ask", decider="operator", remember="connection")])
        g.approvals.decide(g.approvals.list()[0].id, True, "the agent's user")
    assert verdicts == [Verdict("approved", "the agent's user")]
    now = g.stands(facts(), AGENT, asked)
    assert now is not None and (now.action, now.operator_only) == ("ask", True)
    assert (await g.ask(facts(), AGENT, nothing_known, now, NONE)).by == TIMEOUT


async def test_an_agent_with_too_many_calls_waiting_is_told_so_not_held(
    autojump_clock: trio.testing.MockClock,
) -> None:
    g = gate({"action": "ask"})
    decision = g.decide(facts(), AGENT)
    async with trio.open_nursery() as nursery:
        for _ in range(PER_AGENT):
            nursery.start_soon(g.ask, facts(), AGENT, nothing_known, decision, NONE)
        await waiting(g.approvals, PER_AGENT)
        start = trio.current_time()
        verdict = await g.ask(facts(), AGENT, nothing_known, decision, NONE)
        assert trio.current_time() == start
        nursery.cancel_scope.cancel()
    assert (verdict.outcome, verdict.by) == ("unanswered", "mcpd")
    assert verdict.reason is not None and "already wait" in verdict.reason


async def test_the_agents_user_may_decide_and_the_approval_is_remembered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    g = gate({"action": "ask", "remember": "connection"})
    decision = g.decide(facts(), AGENT)
    asked: list[ApprovalRequest] = []

    async def user(request: ApprovalRequest) -> Verdict | None:
        asked.append(request)
        return Verdict("approved", "the agent's user")

    verdict = await g.ask(
        facts(), AGENT, nothing_known, decision, shown_arguments(b'{"k": 1}'), user
    )
    assert verdict == Verdict("approved", "the agent's user")
    assert g.stands(facts(), AGENT, decision) is None
    assert [r.arguments for r in asked] == ['{"k":1}']
    assert (await g.ask(facts(), AGENT, nothing_known, decision, NONE, user)).by == REMEMBERED
    assert len(asked) == 1
