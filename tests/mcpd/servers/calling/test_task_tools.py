"""A legacy server's tool that runs only as a task (``execution.taskSupport:
"required"``), called through mcpd by agents that know nothing of tasks: mcpd runs
the task at the server and answers with its result."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests.support.clients.agent import Agent, connect, make_config, running

SERVER = str(Path(__file__).resolve().parents[3] / "support" / "asking" / "legacy_task_server.py")
RESEARCH = "mcp__jobs__research"


def config(tmp_path: Path, **server: Any) -> tuple[Any, Path]:
    log = tmp_path / "server.in"
    cfg = make_config(
        tmp_path,
        {"jobs": {"command": sys.executable, "args": [SERVER, str(log)], **server}},
        result_budget_chars=400,
    )
    return cfg, log


def received(log: Path, method: str) -> list[dict[str, Any]]:
    msgs = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    return [m for m in msgs if m.get("method") == method]


def text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


async def settled(agent: Agent) -> None:
    """Everything mcpd had to tell the server is sent: a plain call after it is
    answered only once the server has read all that came before."""
    await trio.testing.wait_all_tasks_blocked()
    assert text(await agent.call("mcp__jobs__plain")) == "plain done"


@pytest.mark.parametrize("modern", [False, True])
async def test_a_task_only_tool_is_listed_plain_and_answers_with_the_tasks_result(
    tmp_path: Path, modern: bool
) -> None:
    cfg, log = config(tmp_path)
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path, modern) as agent:
            if not modern:
                await agent.initialize()
            tools = {t["name"]: t for t in await agent.tools()}
            # A host that sees "required" refuses to call the tool without a task of
            # its own, which mcpd does not take.
            assert "execution" not in tools[RESEARCH]
            # 2026-07-28 has no execution: only a legacy agent is shown it.
            quick = tools["mcp__jobs__quick"].get("execution")
            assert quick == (None if modern else {"taskSupport": "optional"})
            result = await agent.result(
                "tools/call",
                {
                    "name": RESEARCH,
                    "arguments": {"topic": "bees " * 200, "steps": 3},
                    "_meta": {"progressToken": "p-1"},
                },
            )
            assert result.get("isError") is not True
            assert text(result).startswith("researched bees bees")
            assert "cut" in text(result)  # the result budget applies, as to any call
            assert any(b["type"] == "resource_link" for b in result["content"])
            if modern:
                assert result["resultType"] == "complete"
            progress = [
                n["params"] for n in agent.notifications if n["method"] == "notifications/progress"
            ]
            assert [p["progress"] for p in progress] == [1, 2, 3]
            assert {p["progressToken"] for p in progress} == {"p-1"}
            assert text(await agent.call("mcp__jobs__quick")) == "quick done"
    calls = {c["params"]["name"]: c["params"] for c in received(log, "tools/call")}
    assert calls["research"]["task"] == {"ttl": 600_000}
    assert "task" not in calls["quick"]  # "optional" stays a plain call
    asked = received(log, "tasks/result")
    assert [m["params"] for m in asked] == [{"taskId": "task-1"}]
    assert received(log, "tasks/get") == []  # waited for, never polled


@pytest.mark.parametrize("modern", [False, True])
async def test_a_result_type_in_a_tasks_result_reaches_a_modern_agent_only(
    tmp_path: Path, modern: bool
) -> None:
    cfg, _ = config(tmp_path)
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path, modern) as agent:
            if not modern:
                await agent.initialize()
            params = {"name": RESEARCH, "arguments": {"topic": "bees", "typed": True}}
            result = await agent.result("tools/call", params)
            assert text(result) == "researched bees"
            assert result.get("resultType") == ("complete" if modern else None)


async def test_a_task_that_fails_with_an_error_passes_the_error_on(tmp_path: Path) -> None:
    cfg, log = config(tmp_path)
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path, False) as agent:
            await agent.initialize()
            reply = await agent.rpc("tools/call", {"name": RESEARCH, "arguments": {"fail": True}})
    assert reply["error"]["code"] == -32000
    assert reply["error"]["message"] == "[jobs] the research failed"
    assert received(log, "tasks/cancel") == []  # it was over


async def test_cancelling_the_call_cancels_its_task_at_the_server(tmp_path: Path) -> None:
    cfg, log = config(tmp_path)
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path, False) as agent:
            await agent.initialize()
            call = {
                "jsonrpc": "2.0",
                "id": "long",
                "method": "tools/call",
                "params": {
                    "name": RESEARCH,
                    "arguments": {"hang": True, "steps": 1},
                    "_meta": {"progressToken": "p"},
                },
            }
            await agent.send_raw(json.dumps(call).encode() + b"\n")
            await agent.wait_notifications(1)  # the task is under way
            await agent.send_raw(
                b'{"jsonrpc":"2.0","method":"notifications/cancelled",'
                b'"params":{"requestId":"long"}}\n'
            )
            await settled(agent)
            assert agent.unmatched == []  # a cancelled call gets no answer
    assert [m["params"] for m in received(log, "tasks/cancel")] == [{"taskId": "task-1"}]


async def test_a_task_that_runs_out_of_time_is_an_outage_and_is_cancelled(
    tmp_path: Path,
) -> None:
    cfg, log = config(tmp_path, tool_timeouts={"research": 0.3})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path, False) as agent:
            await agent.initialize()
            result = await agent.call(RESEARCH, {"hang": True})
            assert result["isError"] is True
            assert result["_meta"]["mcpd/outage"]["state"] == "timeout"
            assert "servers.jobs.tool_timeouts" in text(result)
            await settled(agent)
    assert [m["params"] for m in received(log, "tasks/cancel")] == [{"taskId": "task-1"}]


@pytest.mark.parametrize("named", [777, None, "absent"])
async def test_a_task_handle_without_a_string_id_fails_the_call_as_the_servers(
    tmp_path: Path, named: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Not a result with no content, audited as one that went well."""
    from mcpd.audit.reader import AuditRecords

    log = tmp_path / "server.in"
    job = {"command": sys.executable, "args": [SERVER, str(log)]}
    cfg = make_config(tmp_path, {"jobs": job}, state_dir=str(tmp_path / "state"))
    with trio.fail_after(30), caplog.at_level(logging.WARNING, logger="mcpd"):
        async with running(cfg) as daemon, connect(daemon.socket_path, False) as agent:
            await agent.initialize()
            result = await agent.call(RESEARCH, {"id": named})
            assert result["isError"] is True
            assert result["_meta"]["mcpd/outage"]["state"] == "malformed"
            assert "The tool server 'jobs' sent a malformed reply" in text(result)
            assert "its task handle is malformed" in text(result)
            await daemon.audit.flush()
            [record] = [r for r in AuditRecords(str(tmp_path / "state")) if r.name == RESEARCH]
            assert record.outcome != "ok"
    assert received(log, "tasks/result") == []
    [warned] = [r for r in caplog.records if r.__dict__.get("mcpd_event") == "malformed_reply"]
    assert warned.__dict__.get("mcpd_server") == "jobs"


async def test_a_task_id_past_the_bound_fails_the_call_and_is_never_sent_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mcpd.servers.shared import MAX_TASK_ID

    cfg, log = config(tmp_path)
    with trio.fail_after(30), caplog.at_level(logging.INFO, logger="mcpd"):
        async with running(cfg) as daemon, connect(daemon.socket_path, False) as agent:
            await agent.initialize()
            result = await agent.call(RESEARCH, {"long_id": MAX_TASK_ID, "hang": True})
            assert result["isError"] is True
            assert f"an id of {MAX_TASK_ID + 6} bytes, past the {MAX_TASK_ID}" in text(result)
            # Up to the bound, as ever.
            result = await agent.call(RESEARCH, {"long_id": MAX_TASK_ID - 6, "topic": "ants"})
            assert text(result).startswith("researched ants")
            await settled(agent)
    asked = [m["params"]["taskId"] for m in received(log, "tasks/result")]
    assert asked == ["task-2" + "x" * (MAX_TASK_ID - 6)]
    assert all(len(r.getMessage()) < 2 * MAX_TASK_ID for r in caplog.records)
