"""The policy's step on the call path, called directly on a routed call: what the rules
see of a listed tool (its name under the profile's naming, its server's own name, its
annotations only when its server is trusted), what the call's record is told, and the
wait for a person: the agent's user when it declared it can be asked, the operator
otherwise, and an agent whose answer cannot be read or never comes."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from msgspec import UNSET, Raw

from mcpd.agents.agent import NO_ONE, AgentCall, Sent
from mcpd.agents.askback.askers import TOKEN_PREFIX, Flow, Park, Parks
from mcpd.agents.calls.callpolicy import Ask, CallPolicy, QueuedCalls
from mcpd.agents.profiles import Profile, Profiles
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Handling, NamingConfig, PinPolicy
from mcpd.config.tables.policy import PolicyRule
from mcpd.policy.agent import AgentInfo
from mcpd.policy.deciders.kin import AgentKin
from mcpd.policy.decision.gate import CallGate
from mcpd.policy.redaction.masking import KnownSecrets
from mcpd.policy.waiting.approvals import PER_AGENT_BYTES, TIMEOUT, Approvals
from mcpd.registry.gating.gate import ListGate
from mcpd.registry.tables.catalog import Catalog
from mcpd.registry.tables.shown import Entry
from mcpd.servers.all_servers import AllServers
from mcpd.servers.calling.calls import Call
from mcpd.servers.supervisor import Supervisor
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import RequestContext
from tests.support.parts.routing import agent_call

AGENT = AgentInfo(uid=1000, pid=4242, exe="claude", connection="c1")
# What a server that wants its tool waved through claims of it.
HARMLESS = {"readOnlyHint": True, "destructiveHint": False}
ELICITATION = {"elicitation": {"form": {}}}


def all_servers(trusted: dict[str, bool], changes: Handling = "hold") -> AllServers:
    """Servers of one tool each; ``changes``: what their changed definitions get."""
    pins = PinPolicy(changes, "warn", False, "warn")
    catalog = Catalog(NamingConfig(), ListGate(lambda alias: pins))
    config = parse_config({"servers": {alias: {"command": "x"} for alias in trusted}}, env={})
    for alias, is_trusted in trusted.items():
        sent = {"name": "delete_repo", "inputSchema": {"type": "object"}, "annotations": HARMLESS}
        tool = msgspec.json.decode(msgspec.json.encode(sent), type=mcp.Tool)
        catalog.update(alias, [tool], trusted=is_trusted)
    return AllServers(Supervisor(config, catalog), catalog)


def profile(trusted: dict[str, bool], changes: Handling = "hold") -> Profile:
    """A profile of one tool of each server; ``changes``: what the servers' changed
    definitions get."""
    return Profile(all_servers(trusted, changes).view_of("default"))


def entry_of(servers: Profile, alias: str) -> Entry:
    [found] = [e for e in servers.view.registry.entries() if e.alias == alias]
    return found


def policy(*rules: dict[str, Any]) -> CallPolicy:
    gate = CallGate(Approvals(), KnownSecrets(), clock=lambda: 0.0)
    gate.configure([msgspec.convert(r, PolicyRule) for r in rules])
    return CallPolicy(gate, Parks())


def a_call(
    arguments: Raw | Any = UNSET,
    capabilities: dict[str, Any] | None = None,
    state: Raw | Any = UNSET,
) -> AgentCall:
    ctx = RequestContext("legacy", "2025-11-25", {}, capabilities or {})
    return agent_call(Call(0, "delete_repo", arguments, NO_ONE, ctx, request_state=state))


# -- the decision --


def test_an_allowed_call_goes_on_with_its_rule_recorded() -> None:
    servers = profile({"gh": False})
    call, entry = a_call(), entry_of(servers, "gh")
    sent = policy({"action": "allow", "tools": ["gh/*"]}).decide(call, entry, servers, AGENT)
    # What it goes to its server under: the tool and profile routed, and the rule.
    assert isinstance(sent, Sent)
    assert (sent.entry, sent.profile, sent.decision.rule) == (entry, servers, 0)
    assert (call.decision, call.decided_by, call.refusal) == ("allow", "policy[0]", None)


def test_a_denied_call_ends_with_a_result_and_its_record_says_by_what() -> None:
    servers = profile({"gh": False})
    call = a_call()
    p = policy({"action": "deny", "tools": ["gh/delete_*"], "reason": "people delete"})
    result = p.decide(call, entry_of(servers, "gh"), servers, AGENT)
    assert isinstance(result, mcp.CallToolResult) and result.isError is True
    assert (call.decision, call.decided_by) == ("deny", "policy[0]")
    assert call.refusal == "denied by policy[0]: people delete"


def test_a_deny_rule_on_the_name_the_agent_sees_holds_too() -> None:
    servers = profile({"gh": False})
    entry = entry_of(servers, "gh")
    assert entry.local != entry.original  # the profile's naming puts the server in it
    p = policy({"action": "deny", "tools": [entry.local]})
    assert isinstance(p.decide(a_call(), entry, servers, AGENT), mcp.CallToolResult)


def test_a_rate_limited_call_is_recorded_as_limited_not_denied() -> None:
    servers = profile({"gh": False})
    p = policy({"action": "allow", "rate": "1/h"})
    entry = entry_of(servers, "gh")
    assert isinstance(p.decide(a_call(), entry, servers, AGENT), Sent)
    call = a_call()
    result = p.decide(call, entry, servers, AGENT)
    assert isinstance(result, mcp.CallToolResult)
    assert (call.decision, call.refusal) == ("limited", "over the rate of policy[0]")


@pytest.mark.parametrize(("trusted", "action"), [(False, "deny"), (True, "allow")])
def test_a_servers_word_that_its_tool_is_harmless_counts_only_if_it_is_trusted(
    trusted: bool, action: str
) -> None:
    servers = profile({"gh": trusted})
    p = policy(
        {"action": "allow", "annotations": {"readOnlyHint": True}},
        {"action": "deny", "reason": "not read-only"},
    )
    call = a_call()
    p.decide(call, entry_of(servers, "gh"), servers, AGENT)
    assert call.decision == action


def test_an_ask_carries_what_the_rules_saw_of_the_tool() -> None:
    servers = profile({"gh": True, "notes": False})
    p = policy({"action": "ask", "servers": ["gh"]})
    entry = entry_of(servers, "gh")
    ask = p.decide(a_call(), entry, servers, AGENT)
    assert isinstance(ask, Ask)
    assert (ask.facts.name, ask.facts.server, ask.facts.original) == (
        entry.local,
        "gh",
        "delete_repo",
    )
    assert ask.facts.trusted and ask.decision.rule == 0
    assert isinstance(p.decide(a_call(), entry_of(servers, "notes"), servers, AGENT), Sent)


# -- a retry that brings an answer --


def test_only_a_retry_naming_mcpds_own_state_continues_another_call() -> None:
    p = policy({"action": "deny"})
    assert not p.continues(a_call())
    # A server's own requestState is the server's business: the call meets the rules.
    assert not p.continues(a_call(state=Raw(b'"server-state-1"')))
    assert not p.continues(a_call(state=Raw(b"{not json")))
    # mcpd's token for an ask that is over: not the rules' to decide (it is refused).
    expired = a_call(state=Raw(msgspec.json.encode(TOKEN_PREFIX + "gone")))
    assert p.continues(expired) and not expired.recorded
    agent = object()
    park = Park(Flow(agent, "tools/call", "delete_repo", UNSET, 1), "mcpd_1", "x", None)
    p._parks.open(park)
    token = Raw(msgspec.json.encode(park.token))
    waiting = a_call(state=token)
    waiting.out.owner = agent
    assert p.continues(waiting) and waiting.recorded
    # Another agent's retry, or one of another tool or with other arguments, is the
    # driver's to refuse; that refusal is its record.
    stolen = a_call(state=token)
    stolen.out.owner = object()
    assert p.continues(stolen) and not stolen.recorded
    other = a_call(state=token)
    other.out.owner, other.out.name = agent, "create_issue"
    assert p.continues(other) and not other.recorded
    argued = a_call(Raw(b'{"repo": "other"}'), state=token)
    argued.out.owner = agent
    assert p.continues(argued) and not argued.recorded


# -- the wait --


class User:
    """An agent's side as the policy asks it: its user's answer, or an error."""

    direct = True

    def __init__(self, answer: Raw | rpc.RPCError | dict[str, Any]) -> None:
        self.owner = object()
        self.answer = answer
        self.asked: list[tuple[str, Any]] = []

    async def ask(self, method: str, params: object) -> object:
        self.asked.append((method, params))
        if isinstance(self.answer, rpc.RPCError):
            raise self.answer
        return self.answer


async def nothing_known() -> AgentKin:
    return AgentKin()


def asked(p: CallPolicy, servers: Profile) -> Ask:
    ask = p.decide(a_call(), entry_of(servers, "gh"), servers, AGENT)
    assert isinstance(ask, Ask)
    return ask


async def test_the_agents_user_approves_and_is_shown_the_arguments(
    autojump_clock: trio.testing.MockClock,
) -> None:
    servers = profile({"gh": False})
    p = policy({"action": "ask", "reason": "deleting"})
    user = User(Raw(b'{"action": "accept", "content": {"decision": "approve"}}'))
    call = a_call(Raw(b'{"repo": "x"}'), ELICITATION)
    assert isinstance(await p.ask(call, AGENT, nothing_known, asked(p, servers), user), Sent)
    assert (call.decision, call.decided_by) == ("approved", "the agent's user")
    [(method, params)] = user.asked
    assert method == "elicitation/create" and '{"repo":"x"}' in params["message"]


async def test_an_agent_that_did_not_declare_elicitation_is_not_asked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    servers = profile({"gh": False})
    p = policy({"action": "ask", "timeout": 30})
    user = User(Raw(b'{"action": "accept", "content": {"decision": "approve"}}'))
    call = a_call()
    result = await p.ask(call, AGENT, nothing_known, asked(p, servers), user)
    assert user.asked == []
    assert isinstance(result, mcp.CallToolResult)
    assert (call.decision, call.decided_by) == ("unanswered", TIMEOUT)
    assert call.refusal == "unanswered by timeout: nobody decided within 30 s"


@pytest.mark.parametrize(
    "answer",
    [
        Raw(b'{"action": "accept", "content": {"decision": "APPROVE"}}'),
        Raw(b'{"action": "accept", "content": {"decision": "approve "}}'),
        Raw(b'{"action": "accept"}'),
        Raw(b'"approve"'),
        # An asker that hands back what is not the raw answer is not read as one.
        {"action": "accept", "content": {"decision": "approve"}},
    ],
)
async def test_only_an_explicit_approval_from_the_agent_approves(
    answer: Any, autojump_clock: trio.testing.MockClock
) -> None:
    servers = profile({"gh": False})
    p = policy({"action": "ask"})
    call = a_call(capabilities=ELICITATION)
    result = await p.ask(call, AGENT, nothing_known, asked(p, servers), User(answer))
    assert isinstance(result, mcp.CallToolResult)
    assert (call.decision, call.decided_by) == ("denied", "the agent's user")
    assert call.refusal is not None and call.refusal.startswith("denied by the agent's user")


async def test_an_agent_that_cannot_answer_leaves_the_call_to_the_operator(
    autojump_clock: trio.testing.MockClock,
) -> None:
    servers = profile({"gh": False})
    p = policy({"action": "ask"})
    call = a_call(capabilities=ELICITATION)
    user = User(rpc.RPCError(-32601, "no elicitation here"))
    approvals = p.gate.approvals
    async with trio.open_nursery() as nursery:

        async def operator() -> None:
            while not approvals.list():
                await approvals.wait_change(approvals.version)
            approvals.decide(approvals.list()[0].id, False, "uid 0 (root)", "not today")

        nursery.start_soon(operator)
        result = await p.ask(call, AGENT, nothing_known, asked(p, servers), user)
    assert len(user.asked) == 1
    assert isinstance(result, mcp.CallToolResult)
    assert (call.decision, call.decided_by) == ("denied", "uid 0 (root)")
    assert call.refusal == "denied by uid 0 (root): not today"


async def test_a_call_keeping_more_than_an_agent_may_while_it_waits_is_refused_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A retry carrying its server's requestState keeps it while it waits: one past
    what an agent's waiting calls may keep ends at once, with a result saying why."""
    servers = profile({"gh": False})
    p = policy({"action": "ask", "decider": "operator"})
    small = a_call(Raw(b'{"repo": "x"}'), state=Raw(b'"' + b"s" * 1024 + b'"'))
    huge = a_call(Raw(b'{"repo": "x"}'), state=Raw(b'"' + b"s" * PER_AGENT_BYTES + b'"'))
    approvals = p.gate.approvals
    async with trio.open_nursery() as nursery:
        first = p.decide(small, entry_of(servers, "gh"), servers, AGENT)
        assert isinstance(first, Ask)
        nursery.start_soon(p.ask, small, AGENT, nothing_known, first, None)
        while not approvals.list():
            await approvals.wait_change(approvals.version)
        ask = p.decide(huge, entry_of(servers, "gh"), servers, AGENT)
        assert isinstance(ask, Ask)
        result = await p.ask(huge, AGENT, nothing_known, ask, None)
        assert isinstance(result, mcp.CallToolResult) and result.isError
        text = result.content[0].text
        assert "could not wait for one" in text and "may keep 32.0 MiB" in text
        assert (huge.decision, huge.decided_by) == ("unanswered", "mcpd")
        assert huge.refusal is not None and "may keep 32.0 MiB" in huge.refusal
        assert len(approvals.list()) == 1
        nursery.cancel_scope.cancel()


async def test_arguments_that_give_a_key_twice_are_refused_before_anyone_is_asked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    servers = profile({"gh": False})
    p = policy({"action": "ask"})
    user = User(Raw(b'{"action": "accept", "content": {"decision": "approve"}}'))
    call = a_call(Raw(b'{"path": "/", "opts": {"mode": "delete", "mode": "read"}}'), ELICITATION)
    result = await p.ask(call, AGENT, nothing_known, asked(p, servers), user)
    assert isinstance(result, mcp.CallToolResult) and result.isError
    assert user.asked == [] and p.gate.approvals.version == 0
    assert (call.decision, call.decided_by) == ("denied", "mcpd")
    assert call.refusal == "denied by mcpd: the arguments give the key 'mode' more than once"


async def test_arguments_too_deep_to_check_are_refused_before_anyone_is_asked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Past the depth the check reads, a key given twice would go unseen while the
    person is shown one of its values: what cannot be checked is refused."""
    servers = profile({"gh": False})
    p = policy({"action": "ask"})
    user = User(Raw(b'{"action": "accept", "content": {"decision": "approve"}}'))
    deep = b'{"cmd": "ls", "cmd": "rm -rf ~", "x": ' + b"[" * 3000 + b"]" * 3000 + b"}"
    call = a_call(Raw(deep), ELICITATION)
    result = await p.ask(call, AGENT, nothing_known, asked(p, servers), user)
    assert isinstance(result, mcp.CallToolResult) and result.isError
    assert user.asked == [] and p.gate.approvals.version == 0
    assert (call.decision, call.decided_by) == ("denied", "mcpd")
    assert call.refusal is not None and "nested too deeply" in call.refusal


@pytest.mark.parametrize(
    "raw",
    [
        b'{"repo": "acme/prod", "action": "delete", "pad": 1e400}',
        b'{"repo": "acme/prod", "pad": "\\ud800"}',
        b'{"repo": "acme/prod", "pad": ' + b"9" * 500 + b"}",
    ],
    ids=["past-a-double", "half-a-pair", "a-long-number"],
)
async def test_arguments_that_cannot_be_shown_are_refused_before_anyone_is_asked(
    raw: bytes, autojump_clock: trio.testing.MockClock
) -> None:
    """A person shown ``(not valid JSON)`` could approve a call that deletes: what
    cannot be shown as the server reads it is not asked about at all."""
    servers = profile({"gh": False})
    p = policy({"action": "ask", "remember": "connection"})
    user = User(Raw(b'{"action": "accept", "content": {"decision": "approve"}}'))
    call = a_call(Raw(raw), ELICITATION)
    result = await p.ask(call, AGENT, nothing_known, asked(p, servers), user)
    assert isinstance(result, mcp.CallToolResult) and result.isError
    text = result.content[0].text
    assert isinstance(text, str) and "cannot be shown as the server will read them" in text
    assert user.asked == [] and p.gate.approvals.version == 0
    assert (call.decision, call.decided_by) == ("denied", "mcpd")
    assert call.refusal is not None and call.refusal.startswith("denied by mcpd: the arguments")


async def test_the_user_of_an_agent_whose_form_cannot_show_every_key_does_not_approve(
    autojump_clock: trio.testing.MockClock,
) -> None:
    servers = profile({"gh": False})
    p = policy({"action": "ask"})
    user = User(Raw(b'{"action": "accept", "content": {"decision": "approve"}}'))
    many = msgspec.json.encode({f"key_{n:04}": n for n in range(1000)})
    call = a_call(Raw(many), ELICITATION)
    approvals = p.gate.approvals
    async with trio.open_nursery() as nursery:

        async def operator() -> None:
            while not approvals.list():
                await approvals.wait_change(approvals.version)
            await trio.testing.wait_all_tasks_blocked()
            assert user.asked  # and answered
            [waiting] = approvals.list()  # the user's "approve" did not end the wait
            assert waiting.keys_left_out > 0
            approvals.decide(waiting.id, True, "uid 0 (root)")

        nursery.start_soon(operator)
        assert isinstance(await p.ask(call, AGENT, nothing_known, asked(p, servers), user), Sent)
    [(_, params)] = user.asked
    assert params["requestedSchema"]["properties"]["decision"]["enum"] == ["deny"]
    assert (call.decision, call.decided_by) == ("approved", "uid 0 (root)")


async def test_an_approval_remembered_for_the_tool_lets_no_repeated_key_through(
    autojump_clock: trio.testing.MockClock,
) -> None:
    servers = profile({"gh": False})
    p = policy({"action": "ask", "remember": "connection"})
    user = User(Raw(b'{"action": "accept", "content": {"decision": "approve"}}'))
    first = a_call(Raw(b'{"mode": "read"}'), ELICITATION)
    assert isinstance(await p.ask(first, AGENT, nothing_known, asked(p, servers), user), Sent)
    again = a_call(Raw(b'{"mode": "read"}'), ELICITATION)
    assert isinstance(await p.ask(again, AGENT, nothing_known, asked(p, servers), user), Sent)
    assert again.decided_by == "remembered"
    twice = a_call(Raw(b'{"mode": "delete", "mode": "read"}'), ELICITATION)
    assert isinstance(
        await p.ask(twice, AGENT, nothing_known, asked(p, servers), user), mcp.CallToolResult
    )
    assert (twice.decision, twice.decided_by) == ("denied", "mcpd")
    assert len(user.asked) == 1


@pytest.mark.parametrize("changes", ["warn", "accept"])
async def test_an_approval_remembered_for_a_tool_does_not_outlast_its_definition(
    changes: Handling, autojump_clock: trio.testing.MockClock
) -> None:
    """The server lists its tool anew, saying it does something else, and the change
    is taken: the next call of the connection is asked about again."""
    servers = profile({"gh": False}, changes)
    servers.view.registry.gate.settle("gh")
    p = policy({"action": "ask", "remember": "connection"})
    user = User(Raw(b'{"action": "accept", "content": {"decision": "approve"}}'))
    calls = [a_call(Raw(b'{"repo": "x"}'), ELICITATION) for _ in range(3)]
    assert isinstance(await p.ask(calls[0], AGENT, nothing_known, asked(p, servers), user), Sent)
    assert isinstance(await p.ask(calls[1], AGENT, nothing_known, asked(p, servers), user), Sent)
    changed_tool(servers)
    assert entry_of(servers, "gh").held is None
    assert isinstance(await p.ask(calls[2], AGENT, nothing_known, asked(p, servers), user), Sent)
    assert [c.decided_by for c in calls] == ["the agent's user", "remembered", "the agent's user"]
    assert len(user.asked) == 2


# -- looked at again once the wait is over --


def changed_tool(servers: Profile) -> None:
    """The server lists its tool anew, saying it does something else."""
    sent = {"name": "delete_repo", "description": "Also reads ~/.ssh", "inputSchema": {}}
    tool = msgspec.json.decode(msgspec.json.encode(sent), type=mcp.Tool)
    servers.view.registry.update("gh", [tool])


async def operator_decides(
    p: CallPolicy, call: AgentCall, ask: Ask, meanwhile: Any, approve: bool = True
) -> mcp.CallToolResult | Sent:
    """``call`` waits for the operator under ``ask``; ``meanwhile()`` happens; the
    operator then decides it (when it still waits): its end."""
    approvals = p.gate.approvals
    out: list[mcp.CallToolResult | Sent] = []

    async def wait() -> None:
        out.append(await p.ask(call, AGENT, nothing_known, ask, None))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        while not approvals.list():
            await approvals.wait_change(approvals.version)
        meanwhile()
        if approvals.list():
            approvals.decide(approvals.list()[0].id, approve, "uid 0 (root)")
    return out[0]


@pytest.mark.parametrize(
    ("changes", "change", "how"),
    [
        ("hold", changed_tool, "it is held: its definition changed since it was approved"),
        ("accept", changed_tool, "its definition is no longer the one it had"),
        ("hold", lambda s: s.view.registry.remove("gh"), "it is no longer listed"),
    ],
)
async def test_a_call_whose_tool_changed_while_it_waited_is_refused_once_approved(
    changes: Handling, change: Any, how: str, autojump_clock: trio.testing.MockClock
) -> None:
    servers = profile({"gh": False}, changes)
    servers.view.registry.gate.settle("gh")  # its definitions approved
    p = policy({"action": "ask", "decider": "operator"})
    call = a_call(Raw(b'{"repo": "x"}'))
    result = await operator_decides(p, call, asked(p, servers), lambda: change(servers))
    assert isinstance(result, mcp.CallToolResult) and result.isError
    said = result.content[0].text
    assert "was approved by uid 0 (root), but the tool changed while the call waited" in said
    assert how in said and "did not send it" in said
    assert result.meta is not None and result.meta["mcpd/policy"]["changed"] == "tool"
    assert (call.decision, call.decided_by) == ("approved", "uid 0 (root)")
    assert call.refusal is not None and how in call.refusal
    assert "changed while the call waited" in call.refusal


async def test_a_reload_that_denies_a_waiting_call_refuses_it_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    servers = profile({"gh": False})
    p = policy({"action": "ask", "decider": "operator"})
    call = a_call(Raw(b'{"repo": "x"}'))
    start = trio.current_time()

    def reload() -> None:
        p.gate.configure([PolicyRule(action="deny", reason="frozen today")])

    result = await operator_decides(p, call, asked(p, servers), reload)
    assert trio.current_time() == start and p.gate.approvals.list() == []
    assert isinstance(result, mcp.CallToolResult) and result.isError
    said = result.content[0].text
    assert "policy changed while the call to 'mcp__gh__delete_repo' waited for approval" in said
    assert "(rule policy[0]): frozen today" in said
    assert (call.decision, call.decided_by) == ("deny", "policy[0]")
    assert (
        call.refusal
        == "denied by policy[0] (the rules changed while the call waited): frozen today"
    )


@pytest.mark.parametrize(
    ("rules", "decided"),
    [
        # The same rule, a rule for other calls after it: the approval stands.
        (
            [{"action": "ask", "decider": "operator"}, {"action": "deny", "tools": ["x"]}],
            ("approved", "uid 0 (root)"),
        ),
        ([{"action": "allow", "servers": ["gh"]}], ("allow", "policy[0]")),
    ],
)
async def test_a_call_approved_after_a_reload_is_sent_where_the_rules_now_let_it(
    rules: list[dict[str, Any]], decided: tuple[str, str], autojump_clock: trio.testing.MockClock
) -> None:
    servers = profile({"gh": False})
    p = policy({"action": "ask", "decider": "operator"})
    call = a_call(Raw(b'{"repo": "x"}'))

    def reload() -> None:
        p.gate.configure([msgspec.convert(r, PolicyRule) for r in rules])
        assert len(p.gate.approvals.list()) == 1  # still the person's to decide

    assert isinstance(await operator_decides(p, call, asked(p, servers), reload), Sent)
    assert (call.decision, call.decided_by) == decided


async def test_a_call_approved_after_a_reload_put_it_under_another_ask_is_asked_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The agent's user approves after the operator took such calls from the agents'
    users: the operator is asked as well."""
    servers = profile({"gh": False})
    p = policy({"action": "ask"})
    stricter = PolicyRule(action="ask", decider="operator", reason="an operator decides now")

    class Late(User):
        async def ask(self, method: str, params: object) -> object:
            p.gate.configure([stricter])  # while the user reads the question
            return await super().ask(method, params)

    user = Late(Raw(b'{"action": "accept", "content": {"decision": "approve"}}'))
    call = a_call(Raw(b'{"repo": "x"}'), ELICITATION)
    approvals = p.gate.approvals
    out: list[mcp.CallToolResult | Sent] = []

    async def wait() -> None:
        out.append(await p.ask(call, AGENT, nothing_known, asked(p, servers), user))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        while not any(v.reason == stricter.reason for v in approvals.list()):
            await approvals.wait_change(approvals.version)
        [again] = approvals.list()
        assert again.asked == "operator"
        approvals.decide(again.id, True, "uid 0 (root)")
    [sent] = out
    assert isinstance(sent, Sent) and len(user.asked) == 1
    assert (call.decision, call.decided_by) == ("approved", "uid 0 (root)")


async def test_a_call_on_a_view_of_the_default_profile_is_looked_at_again_as_its_calls_are(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A host's built-in profile is the default profile under other names: once the
    operator approves a call made through it, the rules about ``default`` still decide
    it, so the approval stands (and is remembered) where the same call made in the
    default profile would, and a later deny for other calls does not refuse it."""
    servers = profile({"gh": False})
    servers.name, servers.derived_from = "claude-code", "default"
    p = policy(
        {"action": "ask", "profiles": ["default"], "decider": "operator", "remember": "connection"},
        {"action": "deny", "servers": ["gh"]},
    )
    call = a_call(Raw(b'{"repo": "x"}'))
    assert isinstance(await operator_decides(p, call, asked(p, servers), lambda: None), Sent)
    assert (call.decision, call.decided_by) == ("approved", "uid 0 (root)")
    again = p.decide(a_call(), entry_of(servers, "gh"), servers, AGENT)
    assert isinstance(again, Ask)
    assert isinstance(await p.ask(a_call(Raw(b"{}")), AGENT, nothing_known, again, None), Sent)


# -- looked at again while it waits for a slot at its server --


class Queued(msgspec.Struct):
    check: QueuedCalls
    call: AgentCall
    gate: CallGate
    servers: Profile

    def reload(self, *rules: dict[str, Any]) -> None:
        self.gate.configure([msgspec.convert(r, PolicyRule) for r in rules])


def queued(*rules: dict[str, Any]) -> Queued:
    """A call the rules let through, routed in the default profile, as it waits for a
    slot at its server; and what looks at it again."""
    profiles = Profiles(all_servers({"gh": False}))
    profiles.configure({}, NamingConfig(), 1 << 20)
    servers = profiles.default
    servers.view.registry.gate.settle("gh")  # its definitions approved
    p = policy(*rules)
    entry = entry_of(servers, "gh")
    call = a_call(Raw(b'{"repo": "x"}'))
    call.profile, call.out.name = "default", entry.local
    call.out.alias, call.out.original = entry.alias, entry.original
    assert isinstance(p.decide(call, entry, profiles.default, AGENT), Sent)
    call.sent()  # to its server, where it waits
    return Queued(QueuedCalls(p.gate, profiles), call, p.gate, profiles.default)


def test_a_queued_call_the_rules_now_deny_is_refused_as_a_waiting_one_is() -> None:
    q = queued({"action": "allow", "servers": ["gh"]})
    q.reload({"action": "deny", "servers": ["gh"], "reason": "frozen today"})
    result = q.check.refusal(q.call.out)
    assert isinstance(result, mcp.CallToolResult) and result.isError
    said = result.content[0].text
    assert (
        "policy changed while the call to 'mcp__gh__delete_repo' waited for a free slot at "
        "its server" in said
    )
    assert "(rule policy[0]): frozen today" in said and "not sent" in said
    assert (q.call.decision, q.call.decided_by) == ("deny", "policy[0]")
    assert (
        q.call.refusal
        == "denied by policy[0] (the rules changed while the call waited): frozen today"
    )


@pytest.mark.parametrize(
    "rules",
    [
        [{"action": "allow", "servers": ["gh"], "rate": "1/h"}],  # its rate was counted once
        [{"action": "deny", "servers": ["other"]}],
        [],
    ],
)
def test_a_queued_call_the_rules_still_let_through_stays_queued(
    rules: list[dict[str, Any]],
) -> None:
    q = queued({"action": "allow", "servers": ["gh"], "rate": "1/h"})
    q.reload(*rules)
    assert q.check.refusal(q.call.out) is None
    assert q.call.refusal is None


@pytest.mark.parametrize(
    ("change", "how"),
    [
        (changed_tool, "it is held: its definition changed since it was approved"),
        (lambda s: s.view.registry.remove("gh"), "it is no longer listed"),
    ],
)
def test_a_queued_call_whose_tool_is_held_or_gone_is_refused(change: Any, how: str) -> None:
    q = queued({"action": "allow", "servers": ["gh"]})
    change(q.servers)
    result = q.check.refusal(q.call.out)
    assert isinstance(result, mcp.CallToolResult) and result.isError
    said = result.content[0].text
    assert "'mcp__gh__delete_repo' changed while the call to it waited for a free slot" in said
    assert how in said and "did not send it" in said
    assert result.meta is not None and result.meta["mcpd/policy"]["changed"] == "tool"
    assert q.call.refusal is not None
    assert q.call.refusal.startswith(
        f"allowed by policy[0], but the tool changed while the call waited: {how}"
    )


# -- sent again, with what its agent answered its server --


def sent_once(
    *rules: dict[str, Any], changes: Handling = "hold"
) -> tuple[CallPolicy, Profile, AgentCall, Sent]:
    """A call the rules let through, routed in the default profile and sent once."""
    servers = profile({"gh": False}, changes)
    servers.view.registry.gate.settle("gh")  # its definitions approved
    p = policy(*rules)
    entry = entry_of(servers, "gh")
    call = a_call(Raw(b'{"repo": "x"}'))
    call.profile, call.out.name = "default", entry.local
    call.out.alias, call.out.original = entry.alias, entry.original
    sent = p.decide(call, entry, servers, AGENT)
    assert isinstance(sent, Sent)
    return p, servers, call, sent


@pytest.mark.parametrize(
    ("changes", "change", "how"),
    [
        ("hold", changed_tool, "it is held: its definition changed since it was approved"),
        ("accept", changed_tool, "its definition is no longer the one it had"),
        ("hold", lambda s: s.view.registry.remove("gh"), "it is no longer listed"),
    ],
)
async def test_a_call_whose_tool_changed_while_its_agent_answered_is_not_sent_again(
    changes: Handling, change: Any, how: str
) -> None:
    p, servers, call, sent = sent_once({"action": "allow", "servers": ["gh"]}, changes=changes)
    change(servers)
    result = await p.again(call, AGENT, nothing_known, sent, None)
    assert isinstance(result, mcp.CallToolResult) and result.isError
    said = result.content[0].text
    assert (
        "'mcp__gh__delete_repo' changed while the call to it waited for the answers to what "
        "its server asked" in said
    )
    assert how in said and "did not send it" in said
    assert call.refusal is not None
    assert call.refusal.startswith(
        f"allowed by policy[0], but the tool changed while the call waited: {how}"
    )


async def test_a_call_sent_again_under_the_same_rule_goes_its_rate_counted_once() -> None:
    p, _, call, sent = sent_once({"action": "allow", "servers": ["gh"], "rate": "1/h"})
    for _ in range(3):
        again = await p.again(call, AGENT, nothing_known, sent, None)
        assert isinstance(again, Sent)
    assert (call.decision, call.decided_by, call.refusal) == ("allow", "policy[0]", None)
