"""A call that waited for approval, looked at again once its wait is over, in a running
daemon with agents on its socket: a tool its server changed meanwhile (held until a
person approves it anew) is refused when the operator approves the call, and when a
modern agent's retry brings its user's approval with the requestState mcpd gave before
the change; a reload that denies a waiting call ends it at once (the agent's user is
told to stop asking, and ``mcpd approvals`` lists it no more), while one that allows
it sends it once when approved. None of these reach the server, and each audit record
says what became of the call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from tests.support.agent import META, Agent, connect
from tests.support.answering import connect_answering
from tests.support.policy_daemon import text
from tests.support.waiting_daemon import ASK, CREATE, LIMIT, SEARCH, waiting_daemon

ASKS = {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
APPROVE = {"action": "accept", "content": {"decision": "approve"}}
CHANGED = "but the tool changed while the call waited for approval: it is held"
DENY_SEARCH: list[dict[str, Any]] = [
    {"tools": ["tickets/search"], "action": "deny", "reason": "searches are off today"},
    *ASK,
]


async def test_a_tool_held_while_its_call_waits_is_not_called_once_the_operator_approves(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with waiting_daemon(tmp_path) as setup:
            async with connect(setup.daemon.socket_path) as agent, trio.open_nursery() as nursery:
                got: list[dict[str, Any]] = []

                async def call() -> None:
                    got.append(await agent.call(SEARCH, {"query": "open bugs"}))

                nursery.start_soon(call)
                [waiting] = await setup.pending()
                await setup.change_tool()
                setup.daemon.approvals.decide(waiting.id, True, "uid 0 (root)")
            [result] = got
            assert result["isError"] is True and CHANGED in text(result)
            assert setup.reached("search") == 0
            assert await setup.approvals_listed() == []
            records = await setup.records()
            [record] = [r for r in records if r.name == SEARCH]
            assert (record.decision, record.decided_by, record.outcome) == (
                "approved",
                "uid 0 (root)",
                "refused",
            )
            assert record.reason is not None and "changed while the call waited" in record.reason


async def asked(agent: Agent, name: str) -> tuple[dict[str, Any], str, str]:
    """A modern agent's call to ``name`` that declares elicitation: its params, and of
    mcpd's input_required the key and the requestState."""
    params = {"name": name, "arguments": {"query": "a"}, "_meta": ASKS}
    first = (await agent.rpc("tools/call", params))["result"]
    assert first["resultType"] == "input_required"
    [key] = first["inputRequests"]
    return params, key, first["requestState"]


async def test_a_modern_agents_approval_after_the_tool_changed_carries_no_call_past_it(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with waiting_daemon(tmp_path) as setup, connect(setup.daemon.socket_path) as agent:
            params, key, state = await asked(agent, SEARCH)
            await setup.pending()
            await setup.change_tool()
            again = {**params, "requestState": state, "inputResponses": {key: APPROVE}}
            result = (await agent.rpc("tools/call", again))["result"]
            assert result["isError"] is True and CHANGED in text(result)
            assert setup.daemon.approvals.list() == []
            assert setup.reached("search") == 0
            records = await setup.records()
            [record] = [r for r in records if r.name == SEARCH]
            assert (record.decision, record.outcome, record.agent.era) == (
                "approved",
                "refused",
                "modern",
            )


async def test_a_reload_that_denies_a_waiting_call_ends_it_at_once(tmp_path: Path) -> None:
    """The agent's user, still reading the question when the operator reloads rules
    that deny the call, is told to stop; an approval that comes anyway does nothing."""
    with trio.fail_after(LIMIT):
        async with waiting_daemon(tmp_path) as setup:
            sock = setup.daemon.socket_path
            async with connect_answering(sock, False, lambda m, p: APPROVE) as agent:
                agent.hold = True  # the user takes their time
                await agent.initialize_with({"elicitation": {}})
                got: list[dict[str, Any]] = []
                async with trio.open_nursery() as nursery:

                    async def call() -> None:
                        got.append(await agent.call(SEARCH, {"query": "x"}))

                    nursery.start_soon(call)
                    [question] = await agent.wait_asked(1)
                    await setup.reload(DENY_SEARCH)
                    assert setup.daemon.approvals.list() == []
                    assert await setup.approvals_listed() == []
                [result] = got
                said = text(result)
                assert result["isError"] is True
                assert "policy changed while the call to 'mcp__tickets__search' waited" in said
                assert "searches are off today" in said
                cancelled = [
                    n["params"]["requestId"]
                    for n in agent.notifications
                    if n["method"] == "notifications/cancelled"
                ]
                assert cancelled == [question["id"]]
                agent.answer_held(question)
                direct = await agent.call(SEARCH, {"query": "y"})
                assert "does not allow calls" in text(direct)
            assert setup.reached("search") == 0
            records = await setup.records()
            decided = [(r.decision, r.decided_by, r.outcome) for r in records if r.name == SEARCH]
            assert decided == [("deny", "policy[0]", "refused")] * 2
            assert records[0].reason == (
                "denied by policy[0] (the rules changed while the call waited): "
                "searches are off today"
            )


async def test_a_modern_agents_approval_after_a_reload_denied_its_call_sends_nothing(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with waiting_daemon(tmp_path) as setup, connect(setup.daemon.socket_path) as agent:
            params, key, state = await asked(agent, SEARCH)
            await setup.pending()
            await setup.reload(DENY_SEARCH)
            assert setup.daemon.approvals.list() == []
            again = {**params, "requestState": state, "inputResponses": {key: APPROVE}}
            reply = await agent.rpc("tools/call", again)
            # The wait it answers is over: it starts nothing.
            assert "requestState is mcpd's and has expired" in reply["error"]["message"]
            assert setup.reached("search") == 0
            records = await setup.records()
            assert [(r.decision, r.outcome) for r in records] == [
                ("deny", "refused"),
                ("none", "error"),
            ]


async def test_a_reload_that_allows_a_waiting_call_sends_it_once_approved(
    tmp_path: Path,
) -> None:
    allow = [{"tools": ["tickets/create"], "action": "allow"}, *ASK]
    with trio.fail_after(LIMIT):
        async with waiting_daemon(tmp_path) as setup:
            async with connect(setup.daemon.socket_path) as agent, trio.open_nursery() as nursery:
                got: list[dict[str, Any]] = []

                async def call() -> None:
                    got.append(await agent.call(CREATE, {"query": "a ticket"}))

                nursery.start_soon(call)
                [waiting] = await setup.pending()
                await setup.reload(allow)
                # Still the person's to decide: the rules no longer forbid what they ask.
                assert [v.id for v in setup.daemon.approvals.list()] == [waiting.id]
                setup.daemon.approvals.decide(waiting.id, True, "uid 0 (root)")
            [result] = got
            assert result.get("isError") is not True, json.dumps(result)
            assert setup.reached("create") == 1
            records = await setup.records()
            assert [(r.decision, r.decided_by, r.outcome) for r in records] == [
                ("allow", "policy[0]", "ok")
            ]
