"""The ``[[policy]]`` rules on the call path of a running daemon, with agents on its socket:
a denied call never reaches its server and the model reads why; search mode's meta-call
meets the same rules; an ``ask`` call waits, holding no server slot, for the agent's user
(a legacy agent's elicitation, a modern agent's input_required) or the operator, and is
sent once when approved; a wait nobody ends is refused at the rule's timeout; an agent
that cancels or hangs up leaves nothing pending; rates refuse with a retry time; an
approval remembered for a connection ends with it. Every call leaves one audit record
with its decision and who made it."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import META, Agent, connect
from tests.support.clients.answering import connect_answering
from tests.support.clients.daemon_http import modern, modern_headers, post
from tests.support.daemons.policy import LIMIT, policy_daemon, text


async def test_a_denied_call_never_reaches_its_server_and_says_why(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path) as setup, connect(setup.daemon.socket_path) as agent:
            result = await agent.call("mcp__gh__delete_repo", {"repo": "web"})
            assert result["isError"] is True
            said = text(result)
            assert "mcpd's policy does not allow calls to 'mcp__gh__delete_repo'" in said
            assert "deleting is done by people" in said and "not an outage" in said
            assert result["_meta"]["mcpd/policy"] == {
                "decision": "deny",
                "rule": 0,
                "reason": "deleting is done by people",
            }
            assert setup.reached("delete_repo") == []
            [record] = await setup.records()
            assert (record.name, record.server, record.original) == (
                "mcp__gh__delete_repo",
                "gh",
                "delete_repo",
            )
            assert (record.decision, record.decided_by, record.outcome) == (
                "deny",
                "policy[0]",
                "refused",
            )
            assert record.reason == "denied by policy[0]: deleting is done by people"


async def test_a_meta_call_meets_the_same_rules(tmp_path: Path) -> None:
    profiles = {"finder": {"discovery": "search"}}
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, **profiles) as setup:
            async with connect(setup.daemon.socket_path) as agent:
                await agent.use_profile("finder")
                listed = {t["name"] for t in await agent.tools()}
                assert "mcpd_call_tool" in listed and "mcp__gh__delete_repo" not in listed
                wrapped = {"name": "mcp__gh__delete_repo", "arguments": {"repo": "web"}}
                result = await agent.call("mcpd_call_tool", wrapped)
                assert result["isError"] is True
                assert "mcpd's policy does not allow calls" in text(result)
                read = {"name": "mcp__gh__read_repo", "arguments": {"text": "a"}}
                assert text(await agent.call("mcpd_call_tool", read)) == "read_repo:a"
            assert setup.reached("delete_repo") == []
            denied, allowed = await setup.records()
            assert (denied.name, denied.decision, denied.agent.profile) == (
                "mcp__gh__delete_repo",
                "deny",
                "finder",
            )
            assert (allowed.name, allowed.outcome, allowed.decision) == (
                "mcp__gh__read_repo",
                "ok",
                "allow",
            )
            assert allowed.decided_by == "policy[3]"


def elicitation_answer(decision: str, reason: str = "") -> Any:
    def answer(method: str, params: Any) -> Any:
        assert method == "elicitation/create"
        return {"action": "accept", "content": {"decision": decision, "reason": reason}}

    return answer


async def test_a_legacy_agent_s_user_is_asked_and_approving_sends_the_call_once(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path) as setup:
            sock = setup.daemon.socket_path
            async with connect_answering(sock, False, elicitation_answer("approve")) as agent:
                await agent.initialize_with({"elicitation": {}})
                args = {"title": "Login times out", "text": "t"}
                result = await agent.call("mcp__gh__create_issue", args)
                assert text(result) == "create_issue:t"
                [asked] = agent.asked
                assert asked["method"] == "elicitation/create"
                message = asked["params"]["message"]
                assert "mcpd asks before this call (issues need a person)" in message
                assert (
                    "Tool: mcp__gh__create_issue on the server 'gh', which calls it create_issue"
                    in message
                )
                assert '"title":"Login times out"' in message
                assert asked["params"]["requestedSchema"]["required"] == ["decision"]
            assert len(setup.reached("create_issue")) == 1
            [record] = await setup.records()
            assert (record.decision, record.decided_by, record.outcome) == (
                "approved",
                "the agent's user",
                "ok",
            )
            assert (record.agent.era, record.agent.pid) == ("legacy", setup_pid())


def setup_pid() -> int:
    return os.getpid()  # the agents here are this process, as the kernel tells mcpd


async def test_a_legacy_agent_s_user_denies_and_the_server_never_sees_it(tmp_path: Path) -> None:
    answer = elicitation_answer("deny", "not this repository")
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path) as setup:
            async with connect_answering(setup.daemon.socket_path, False, answer) as agent:
                await agent.initialize_with({"elicitation": {}})
                result = await agent.call("mcp__gh__create_issue", {"title": "x"})
                assert result["isError"] is True
                said = text(result)
                assert "denied by the agent's user: not this repository" in said
                assert "not sent to the server" in said
            assert setup.reached("create_issue") == []
            [record] = await setup.records()
            assert (record.decision, record.outcome) == ("denied", "refused")
            assert record.reason == "denied by the agent's user: not this repository"


async def modern_call(agent: Agent, name: str, args: dict[str, Any], decision: str) -> Any:
    """A modern agent's call that declares elicitation: mcpd's input_required answered
    with ``decision``, and the call made again with the answer."""
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    params: dict[str, Any] = {"name": name, "arguments": args, "_meta": meta}
    first = (await agent.rpc("tools/call", params))["result"]
    assert first["resultType"] == "input_required"
    [(key, asked)] = first["inputRequests"].items()
    assert asked["method"] == "elicitation/create"
    assert "mcpd asks before this call" in asked["params"]["message"]
    answer = {"action": "accept", "content": {"decision": decision}}
    again = {**params, "inputResponses": {key: answer}, "requestState": first["requestState"]}
    return (await agent.rpc("tools/call", again))["result"]


async def test_a_modern_agent_s_user_is_asked_with_input_required(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path) as setup, connect(setup.daemon.socket_path) as agent:
            args = {"title": "x", "text": "m"}
            approved = await modern_call(agent, "mcp__gh__create_issue", args, "approve")
            assert text(approved) == "create_issue:m"
            assert approved["resultType"] == "complete"
            denied = await modern_call(agent, "mcp__gh__create_issue", args, "deny")
            assert denied["isError"] is True
            assert len(setup.reached("create_issue")) == 1
            records = await setup.records()
            assert [(r.decision, r.outcome, r.agent.era) for r in records] == [
                ("approved", "ok", "modern"),
                ("denied", "refused", "modern"),
            ]


async def test_an_agent_that_cannot_be_asked_waits_for_the_operator_holding_no_slot(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path) as setup:
            sock = setup.daemon.socket_path
            async with (
                connect(sock) as asking,
                connect(sock) as other,
                trio.open_nursery() as nursery,
            ):
                got: list[Any] = []

                async def call() -> None:
                    got.append(await asking.call("mcp__gh__create_issue", {"text": "op"}))

                nursery.start_soon(call)
                [waiting] = await setup.pending()
                assert (waiting.tool, waiting.server, waiting.asked) == (
                    "mcp__gh__create_issue",
                    "gh",
                    "operator",
                )
                # The server (one slot: max_concurrency = 1) serves others meanwhile.
                for _ in range(2):
                    assert text(await other.call("mcp__gh__read_repo")) == "read_repo:"
                assert setup.reached("create_issue") == []
                setup.daemon.approvals.decide(waiting.id, True, "uid 0 (root)")
            assert text(got[0]) == "create_issue:op"
            assert len(setup.reached("create_issue")) == 1
            records = await setup.records()
            mine = [r for r in records if r.name == "mcp__gh__create_issue"]
            assert [(r.decision, r.decided_by) for r in mine] == [("approved", "uid 0 (root)")]


async def test_nobody_deciding_in_time_refuses_the_call(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path) as setup, connect(setup.daemon.socket_path) as agent:
            result = await agent.call("mcp__gh__merge", {"pr": 7})
            assert result["isError"] is True
            said = text(result)
            assert "Nobody approved the call to 'mcp__gh__merge' within 0.5 s" in said
            assert "not sent" in said
            assert setup.daemon.approvals.list() == []
            assert setup.reached("merge") == []
            [record] = await setup.records()
            assert (record.decision, record.decided_by, record.outcome) == (
                "unanswered",
                "timeout",
                "refused",
            )


async def test_a_cancelled_wait_leaves_nothing_pending(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path) as setup:
            sock = setup.daemon.socket_path
            async with connect(sock) as agent, trio.open_nursery() as nursery:
                request = {"name": "mcp__gh__create_issue", "arguments": {}}
                nursery.start_soon(functools.partial(agent.rpc, "tools/call", request, rid="waits"))
                await setup.pending()
                cancel = {"requestId": "waits", "reason": "the user moved on"}
                line = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}
                await agent.send_raw(json.dumps(line).encode() + b"\n")
                await setup.none_pending()
                nursery.cancel_scope.cancel()
            # An agent that hangs up while its call waits leaves nothing either.
            async with connect(sock) as leaving, trio.open_nursery() as nursery:

                async def call_and_hang_up() -> None:
                    with contextlib.suppress(ConnectionError):
                        await leaving.call("mcp__gh__create_issue", {})

                nursery.start_soon(call_and_hang_up)
                await setup.pending()
                await leaving.stream.aclose()
                await setup.none_pending()
                nursery.cancel_scope.cancel()
            assert setup.reached("create_issue") == []
            records = await setup.records()
            assert [(r.decision, r.outcome) for r in records] == [
                ("ask", "cancelled"),
                ("ask", "cancelled"),
            ]


async def test_a_rate_refuses_with_when_to_call_again(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path) as setup, connect(setup.daemon.socket_path) as agent:
            for _ in range(2):
                assert text(await agent.call("mcp__gh__read_repo")) == "read_repo:"
            over = await agent.call("mcp__gh__read_repo")
            assert over["isError"] is True
            assert "at most 2 calls a minute (rule policy[3])" in text(over)
            assert over["_meta"]["mcpd/policy"]["decision"] == "limited"
            assert "retry_at" in over["_meta"]["mcpd/policy"]
            assert len(setup.reached("read_repo")) == 2
            records = await setup.records()
            assert [r.decision for r in records] == ["allow", "allow", "limited"]


async def test_an_approval_remembered_for_a_connection_ends_with_it(tmp_path: Path) -> None:
    rules = [{"tools": ["gh/create_issue"], "action": "ask", "remember": "connection"}]
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, rules) as setup:
            sock = setup.daemon.socket_path
            answer = elicitation_answer("approve")
            async with connect_answering(sock, False, answer) as agent:
                await agent.initialize_with({"elicitation": {}})
                for n in range(3):
                    assert text(await agent.call("mcp__gh__create_issue", {"text": str(n)}))
                assert len(agent.asked) == 1  # once, then remembered
            async with connect_answering(sock, False, answer) as again:
                await again.initialize_with({"elicitation": {}})
                await again.call("mcp__gh__create_issue", {})
                assert len(again.asked) == 1  # a new connection is asked again
            records = await setup.records()
            assert [r.decided_by for r in records] == [
                "the agent's user",
                "remembered",
                "remembered",
                "the agent's user",
            ]


async def test_an_agent_never_sees_its_call_decided_by_its_own_answer_twice(
    tmp_path: Path,
) -> None:
    """A modern agent's answer that comes back for a wait already over (the operator
    decided first) does not start the call again."""
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path) as setup, connect(setup.daemon.socket_path) as agent:
            meta = {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
            params = {"name": "mcp__gh__create_issue", "arguments": {"text": "o"}, "_meta": meta}
            first = (await agent.rpc("tools/call", params))["result"]
            [waiting] = await setup.pending()
            assert waiting.asked == "agent"
            setup.daemon.approvals.decide(waiting.id, False, "uid 0 (root)", "no")
            await setup.none_pending()
            [key] = first["inputRequests"]
            answer = {key: {"action": "accept", "content": {"decision": "approve"}}}
            again = {**params, "inputResponses": answer, "requestState": first["requestState"]}
            reply = await agent.rpc("tools/call", again)
            # The denial (the answer came while the wait was winding down), or an error
            # for an answer to a wait that is over: never the call.
            if "error" in reply:
                assert "requestState is mcpd's and has expired" in reply["error"]["message"]
            else:
                assert "denied by uid 0 (root): no" in text(reply["result"])
            assert setup.reached("create_issue") == []
            records = await setup.records()
            decided = [(r.decision, r.decided_by, r.outcome) for r in records]
            assert decided.count(("denied", "uid 0 (root)", "refused")) == 1
            assert all(r.outcome in ("refused", "error") for r in records)


async def test_calls_without_rules_are_recorded_as_allowed_by_default(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, []) as setup:
            async with connect(setup.daemon.socket_path, modern=False) as agent:
                await agent.initialize()
                await agent.call("mcp__gh__delete_repo", {"text": "ok"})
                await agent.call("mcp__gh__nope", {})
            assert len(setup.reached("delete_repo")) == 1
            ok, unknown = await setup.records()
            assert (ok.decision, ok.decided_by, ok.outcome) == ("allow", "default", "ok")
            assert (ok.args_bytes, ok.agent.era) == (len('{"text": "ok"}'), "legacy")
            assert ok.agent.exe == os.path.basename(os.path.realpath(sys.executable))
            assert (unknown.outcome, unknown.reason, unknown.server) == (
                "refused",
                "unknown tool",
                None,
            )


async def test_calls_over_http_meet_the_same_rules(tmp_path: Path) -> None:
    """An agent on the socket's Streamable HTTP: a deny rule refuses, an ask waits for the
    operator (curl declares no elicitation), and each call is recorded once."""
    create = modern(2, "tools/call", {"name": "mcp__gh__create_issue", "arguments": {"text": "h"}})
    delete = modern(1, "tools/call", {"name": "mcp__gh__delete_repo", "arguments": {}})
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path) as setup:
            sock = setup.daemon.socket_path
            denied = await post(sock, delete, *modern_headers("tools/call", "mcp__gh__delete_repo"))
            assert "mcpd's policy does not allow" in denied.json()["result"]["content"][0]["text"]
            got: list[Any] = []
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    headers = modern_headers("tools/call", "mcp__gh__create_issue")
                    got.append((await post(sock, create, *headers)).json())

                nursery.start_soon(call)
                [waiting] = await setup.pending()
                assert waiting.asked == "operator" and waiting.agent.era == "modern"
                setup.daemon.approvals.decide(waiting.id, True, "uid 0 (root)")
            assert got[0]["result"]["content"][0]["text"] == "create_issue:h"
            assert setup.reached("delete_repo") == []
            assert len(setup.reached("create_issue")) == 1
            records = await setup.records()
            assert [(r.name, r.decision, r.outcome) for r in records] == [
                ("mcp__gh__delete_repo", "deny", "refused"),
                ("mcp__gh__create_issue", "approved", "ok"),
            ]


async def test_a_rule_for_the_operator_alone_never_asks_the_agent(tmp_path: Path) -> None:
    """An agent that answers its own questions is its own user: a rule with decider =
    "operator" is decided in `mcpd approvals` (or on the page) only, in either era,
    however willing the agent is to answer."""
    rules = [{"tools": ["gh/merge"], "action": "ask", "decider": "operator"}]
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, rules) as setup:
            sock = setup.daemon.socket_path
            async with (
                connect_answering(sock, False, elicitation_answer("approve")) as legacy,
                connect(sock) as modern_agent,
                trio.open_nursery() as nursery,
            ):
                await legacy.initialize_with({"elicitation": {}})
                got: list[Any] = []

                async def legacy_call() -> None:
                    got.append(await legacy.call("mcp__gh__merge", {"text": "l"}))

                async def modern_call_() -> None:
                    meta = {
                        **META,
                        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
                    }
                    params = {"name": "mcp__gh__merge", "arguments": {"text": "m"}, "_meta": meta}
                    got.append((await modern_agent.rpc("tools/call", params))["result"])

                nursery.start_soon(legacy_call)
                nursery.start_soon(modern_call_)
                waiting = await setup.pending(2)
                assert [w.asked for w in waiting] == ["operator", "operator"]
                assert legacy.asked == []  # never sent an elicitation
                for w in waiting:
                    setup.daemon.approvals.decide(w.id, True, "uid 0 (root)")
            # The modern agent got its result, never an input_required.
            assert sorted(text(r) for r in got) == ["merge:l", "merge:m"]
            assert len(setup.reached("merge")) == 2
            records = await setup.records()
            assert [(r.decision, r.decided_by) for r in records] == [
                ("approved", "uid 0 (root)"),
                ("approved", "uid 0 (root)"),
            ]
