"""What a server tells of a task, as it reaches the agent through a running daemon: a
task whose status mcpd cannot read is the server's malformed reply, named as the
server's, and the daemon goes on; every way a task reaches an agent (the handle a
tools/call answers with, tasks/get, tasks/update, tasks/cancel) hands its result on
shaped as a tools/call's, and its status message cut."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import META, Agent, connect, make_config, running

CANNED = str(Path(__file__).resolve().parents[3] / "support" / "servers" / "canned.py")
EXT = "io.modelcontextprotocol/tasks"
TASKS_META = {**META, "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}}


async def rpc(agent: Agent, method: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return await agent.rpc(method, {**params, "_meta": TASKS_META}, **kw)


def canned(tmp_path: Path, answers: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(answers))
    return {"command": sys.executable, "args": [CANNED, str(path)]}


def working(task_id: str, **more: Any) -> dict[str, Any]:
    return {"resultType": "task", "taskId": task_id, "status": "working", **more}


def told(result: dict[str, Any]) -> str:
    assert result["isError"] is True
    return "".join(block["text"] for block in result["content"])


@pytest.mark.parametrize("status", [["completed"], {"a": 1}])
async def test_a_task_status_that_is_not_a_string_is_the_servers_malformed_reply(
    tmp_path: Path, status: Any, caplog: pytest.LogCaptureFixture
) -> None:
    answers = {
        "tools": {
            "odd": working("odd"),
            "fine": working("fine"),
            "handed": working("handed", status=status),
            "bare": working("bare"),
        },
        "tasks": {
            "odd": {"resultType": "complete", "taskId": "odd", "status": status},
            "fine": {"resultType": "complete", "taskId": "fine", "status": "working"},
            "bare": '["completed"]',
        },
    }
    cfg = make_config(tmp_path, {"s": canned(tmp_path, answers)})
    with trio.fail_after(60), caplog.at_level(logging.WARNING, logger="mcpd"):
        async with (
            running(cfg) as daemon,
            connect(daemon.socket_path) as agent,
            trio.open_nursery() as nursery,
        ):
            # A handle whose status cannot be read fails its call, in the server's name.
            handed = (await rpc(agent, "tools/call", {"name": "mcp__s__handed"}))["result"]
            assert "'s' sent a malformed reply" in told(handed)
            assert "status" in told(handed)
            for name in ("odd", "fine", "bare"):
                await rpc(agent, "tools/call", {"name": f"mcp__s__{name}"})
            for _ in range(2):  # not once only: each time, and the daemon goes on
                error = (await rpc(agent, "tasks/get", {"taskId": "s:odd"}))["error"]
                assert error["code"] == -32000
                assert "The tool server 's' sent a malformed reply" in error["message"]
                assert "$.status" in error["message"]
                assert "fault in mcpd" not in error["message"]
                assert error["data"]["mcpd/outage"]["state"] == "malformed"
            bare = (await rpc(agent, "tasks/get", {"taskId": "s:bare"}))["error"]
            assert "The tool server 's' sent a malformed reply" in bare["message"]
            # A listen on both tasks hears of the one whose status reads, not the other.
            wanted = {"notifications": {"taskIds": ["s:odd", "s:fine"]}}
            nursery.start_soon(lambda: rpc(agent, "subscriptions/listen", wanted, rid="L1"))
            news = (await agent.wait_notifications(2))[1]
            assert news["method"] == "notifications/tasks"
            assert news["params"]["taskId"] == "s:fine"
            got = (await rpc(agent, "tasks/get", {"taskId": "s:fine"}))["result"]
            assert got["status"] == "working"
            assert [n["method"] for n in agent.notifications].count("notifications/tasks") == 1
            nursery.cancel_scope.cancel()
        daemon.stop()
    malformed = [r for r in caplog.records if r.__dict__.get("mcpd_event") == "malformed_reply"]
    said = [r.getMessage() for r in malformed]
    assert any(m.startswith("s: tools/call failed: its task is malformed") for m in said)
    assert sum(m.startswith("s: tasks/get failed: its task is malformed") for m in said) == 2
    assert any(m.startswith("s: a notifications/tasks was dropped") for m in said)
    assert all(r.__dict__.get("mcpd_server") == "s" for r in malformed)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


SAMPLES = {
    "resultType": "input_required",
    "inputRequests": {
        "more": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 9}}
    },
}
SHADOW = {"content": [{"type": "resource_link", "uri": "file:///etc/shadow", "name": "secrets"}]}


async def test_each_way_a_task_reaches_the_agent_shapes_it_as_a_calls_result(
    tmp_path: Path,
) -> None:
    """A server answering tasks/update or tasks/cancel with the whole task, or handing
    the task out with a result in it already, gets past none of what a tools/call's
    result meets: the budget, the URIs handed over, an ask the agent cannot answer."""
    long_words = "w" * 5000
    answers = {
        "tools": {"job": working("t", statusMessage=long_words, result=SHADOW)},
        "tasks": {"t": working("t", resultType="complete", statusMessage=long_words)},
        "methods": {
            "tasks/update": {
                "resultType": "complete",
                "taskId": "t",
                "status": "completed",
                "result": {"content": [{"type": "text", "text": "y" * 20_000}, *SHADOW["content"]]},
            },
            "tasks/cancel": {
                "resultType": "complete",
                "taskId": "t",
                "status": "completed",
                "result": SAMPLES,
            },
        },
    }
    cfg = make_config(tmp_path, {"s": canned(tmp_path, answers)}, result_budget_chars=1000)
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            handle = (await rpc(agent, "tools/call", {"name": "mcp__s__job"}))["result"]
            got = (await rpc(agent, "tasks/get", {"taskId": "s:t"}))["result"]
            for task in (handle, got):
                assert task["taskId"] == "s:t"
                message = task["statusMessage"]
                assert message == "w" * 1000 + "\u2026 (and 4000 more characters)"
            [link] = handle["result"]["content"]
            assert link["uri"].startswith("mcpd://s/") and link["uri"] != "file:///etc/shadow"
            answers_ = {"more": {"role": "assistant", "content": {"type": "text", "text": "x"}}}
            params = {"taskId": "s:t", "inputResponses": answers_}
            updated = (await rpc(agent, "tasks/update", params))["result"]
            content = updated["result"]["content"]
            assert len(content[0]["text"]) == 1000
            assert "19000 more characters were cut" in content[-1]["text"]
            [link] = [b for b in content if b["type"] == "resource_link"]
            assert link["uri"].startswith("mcpd://s/")
            cancelled = (await rpc(agent, "tasks/cancel", {"taskId": "s:t"}))["result"]
            # The agent declared no sampling: told in mcpd's words, not asked.
            assert cancelled["result"]["resultType"] == "complete"
            assert "asked for input before it can finish" in told(cancelled["result"])
            assert "inputRequests" not in cancelled["result"]
        daemon.stop()
