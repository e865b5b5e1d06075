"""A call whose 2026-07-28 server answers ``input_required`` goes to it again once its
legacy agent has answered, in a running daemon: that send is looked at again first,
as a call that waited for approval is. A reload meanwhile that denies the tool ends the
call unsent; one that puts it under an ``ask`` has a person approve it first; one that
keeps the ``ask`` it was approved under lets it go without asking again. The audit
record says what became of the call. A task's answers (``tasks/update``), which make
its server go on with the call, meet the same look; a prompt or a resource sent for
again with the agent's answers is looked up again in what the agent may see now."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.mcp.features import TASKS_EXTENSION as EXT
from tests.support.clients.agent import META, Agent, connect
from tests.support.daemons.policy import text
from tests.support.daemons.rounds import ASK, LIMIT, NAME, rounds_daemon

DENY = [{"tools": ["s/ask"], "action": "deny", "reason": "no more names"}]
ASKED = [{"tools": ["s/ask"], "action": "ask", "reason": "names need a person"}]


async def test_a_reload_that_denies_the_tool_ends_the_call_before_it_is_sent_again(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with rounds_daemon(tmp_path, []) as setup, setup.agent() as agent:
            got: list[dict[str, Any]] = []
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    got.append(await agent.call(ASK))

                nursery.start_soon(call)
                [question] = await agent.wait_asked(1)
                assert "GitHub user?" in question["params"]["message"]
                await setup.reload(DENY)
                agent.answer_held(question)
            [result] = got
            said = text(result)
            assert result["isError"] is True
            assert (
                "policy changed while the call to 'mcp__s__ask' waited for the answers to what "
                "its server asked" in said
            )
            assert "no more names" in said
            assert len(setup.reached()) == 1  # the first round only
            [record] = await setup.records()
            assert (record.decision, record.decided_by, record.outcome) == (
                "deny",
                "policy[0]",
                "refused",
            )
            assert record.reason == (
                "denied by policy[0] (the rules changed while the call waited): no more names"
            )


async def test_a_reload_that_puts_the_tool_under_an_ask_has_a_person_approve_the_next_send(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with rounds_daemon(tmp_path, []) as setup, setup.agent() as agent:
            got: list[dict[str, Any]] = []
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    got.append(await agent.call(ASK))

                nursery.start_soon(call)
                [question] = await agent.wait_asked(1)
                await setup.reload(ASKED)
                agent.answer_held(question)
                approval = (await agent.wait_asked(2))[1]
                assert "names need a person" in approval["params"]["message"]
                assert len(setup.reached()) == 1  # not sent again before the approval
                agent.answer_held(approval)
            [result] = got
            assert text(result) == "hello mallory (state-\u00e9-1)"
            first, second = setup.reached()
            assert "inputResponses" not in first
            assert second["inputResponses"] == {"login": NAME}
            [record] = await setup.records()
            assert (record.decision, record.outcome) == ("approved", "ok")


async def test_a_call_approved_under_an_ask_that_still_holds_is_sent_again_without_asking(
    tmp_path: Path,
) -> None:
    unrelated = [*ASKED, {"tools": ["s/tell"], "action": "deny"}]
    with trio.fail_after(LIMIT):
        async with rounds_daemon(tmp_path, ASKED) as setup, setup.agent() as agent:
            got: list[dict[str, Any]] = []
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    got.append(await agent.call(ASK))

                nursery.start_soon(call)
                [approval] = await agent.wait_asked(1)
                agent.answer_held(approval)
                question = (await agent.wait_asked(2))[1]
                assert "GitHub user?" in question["params"]["message"]
                await setup.reload(unrelated)
                agent.answer_held(question)
            [result] = got
            assert text(result) == "hello mallory (state-\u00e9-1)"
            assert len(agent.asked) == 2 and len(setup.reached()) == 2
            [record] = await setup.records()
            assert (record.decision, record.outcome) == ("approved", "ok")


# -- a task's answers, which make its server go on with the call --

BUILD = "mcp__s__build"
TASKS_META = {
    **META,
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}},
}
CONFIRM = {"confirm": {"action": "accept", "content": {}}}


async def task_rpc(agent: Agent, method: str, params: dict[str, Any]) -> dict[str, Any]:
    reply = await agent.rpc(method, {**params, "_meta": TASKS_META})
    result: dict[str, Any] = reply["result"]
    return result


@pytest.mark.parametrize(
    ("rules", "more", "said"),
    [
        (
            [{"tools": ["s/build"], "action": "deny", "reason": "no more builds"}],
            (),
            "policy changed while the call to 'mcp__s__build' waited for the answers to what "
            "its server asked",
        ),
        # Its name changed, not the server's own table: a server restarted for a changed
        # table has none of the tasks before, which end with their session.
        ([], ("[naming]", 'template = "tools__{alias}__{tool}"'), "it is no longer listed"),
    ],
)
async def test_a_tasks_answers_after_a_reload_that_refuses_its_tool_do_not_reach_the_server(
    tmp_path: Path, rules: list[dict[str, Any]], more: tuple[str, ...], said: str
) -> None:
    with trio.fail_after(LIMIT):
        async with (
            rounds_daemon(tmp_path, [], tasks=True) as setup,
            connect(setup.daemon.socket_path) as agent,
        ):
            handle = await task_rpc(agent, "tools/call", {"name": BUILD})
            assert handle["resultType"] == "task"
            task = handle["taskId"]
            await setup.reload(rules, *more)
            update = {"taskId": task, "inputResponses": CONFIRM}
            ended = await task_rpc(agent, "tasks/update", update)
            assert ended["status"] == "completed"
            assert ended["result"]["isError"] is True
            assert said in ended["result"]["content"][0]["text"]
            assert setup.reached("tasks/update") == []
            # The task says the same from then on, not what its server still waits for.
            assert await task_rpc(agent, "tasks/get", {"taskId": task}) == ended
            first, refused = await setup.records(BUILD)
            assert first.outcome == "ok"
            assert refused.outcome == "refused" and refused.reason is not None
            assert refused.reason.startswith(
                "denied by policy[0]" if rules else "allowed by default, but the tool changed"
            )


async def test_a_tasks_answers_under_rules_that_still_let_it_go_reach_the_server(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with (
            rounds_daemon(tmp_path, [], tasks=True) as setup,
            connect(setup.daemon.socket_path) as agent,
        ):
            task = (await task_rpc(agent, "tools/call", {"name": BUILD}))["taskId"]
            await setup.reload([{"tools": ["s/other"], "action": "deny"}])
            update = {"taskId": task, "inputResponses": CONFIRM}
            assert await task_rpc(agent, "tasks/update", update) == {"resultType": "complete"}
            [reached] = setup.reached("tasks/update")
            assert reached["inputResponses"] == CONFIRM
            done = await task_rpc(agent, "tasks/get", {"taskId": task})
            assert done["result"]["content"][0]["text"] == "built, confirmed accept"
            assert [r.outcome for r in await setup.records(BUILD)] == ["ok"]


async def test_a_task_from_a_call_its_agent_approved_has_its_answers_looked_at_too(
    tmp_path: Path,
) -> None:
    # The approved call goes on as the agent's answer to mcpd's own question (its
    # requestState): the task its server makes is let through under that approval.
    asked = [{"tools": ["s/build"], "action": "ask", "reason": "builds need a person"}]
    capabilities = {"elicitation": {}, "extensions": {EXT: {}}}
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": capabilities}
    with trio.fail_after(LIMIT):
        async with (
            rounds_daemon(tmp_path, asked, tasks=True) as setup,
            connect(setup.daemon.socket_path) as agent,
        ):
            params: dict[str, Any] = {"name": BUILD, "_meta": meta}
            first = (await agent.rpc("tools/call", params))["result"]
            assert first["resultType"] == "input_required"
            [key] = first["inputRequests"]
            answer = {key: {"action": "accept", "content": {"decision": "approve"}}}
            again = {**params, "inputResponses": answer, "requestState": first["requestState"]}
            handle = (await agent.rpc("tools/call", again))["result"]
            assert handle["resultType"] == "task", handle
            await setup.reload([{"tools": ["s/build"], "action": "deny"}])
            update = {"taskId": handle["taskId"], "inputResponses": CONFIRM}
            ended = await task_rpc(agent, "tasks/update", update)
            assert ended["status"] == "completed" and ended["result"]["isError"] is True
            assert setup.reached("tasks/update") == []


# -- a prompt or resource read again with its agent's answers --


@pytest.mark.parametrize(
    ("method", "params", "more", "said"),
    [
        (
            "prompts/get",
            {"name": "mcp__s__prompt0"},
            ("[servers.s.prompts]", 'deny = ["*"]'),
            "Unknown prompt 'mcp__s__prompt0'",
        ),
        (
            "resources/read",
            {"uri": "test://t0/x"},
            ("[profiles.default.resources]", 'deny = ["*"]'),
            'Resource not found: "test://t0/x".',
        ),
    ],
)
async def test_what_left_the_agents_view_while_it_answered_is_not_asked_for_again(
    tmp_path: Path, method: str, params: dict[str, Any], more: tuple[str, ...], said: str
) -> None:
    with trio.fail_after(LIMIT):
        async with rounds_daemon(tmp_path, []) as setup, setup.agent() as agent:
            got: list[dict[str, Any]] = []
            async with trio.open_nursery() as nursery:

                async def ask() -> None:
                    got.append(await agent.rpc(method, params))

                nursery.start_soon(ask)
                [question] = await agent.wait_asked(1)
                assert "GitHub user?" in question["params"]["message"]
                await setup.reload([], *more)
                agent.answer_held(question)
            [reply] = got
            assert said in reply["error"]["message"]
            [first] = setup.reached(method)  # the first round only
            assert "inputResponses" not in first
            [record] = await setup.records(params.get("name") or params["uri"])
            assert record.outcome == "refused"
