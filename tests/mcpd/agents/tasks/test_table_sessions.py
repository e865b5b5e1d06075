"""A task belongs to the session with its server it was made in, and to its agent's
profile as that is now: a server that starts again (killed, or restarted by a reload)
numbers its tasks anew, and an id an agent holds from before never reaches another
agent's task; a server a reload or a change of profile hides is asked nothing more
about its tasks."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.loading.load import load
from mcpd.daemon import Daemon
from mcpd.servers.connected.upstream import Upstream
from tests.support.clients.agent import META, Agent, connect, running

TASK_SERVER = str(Path(__file__).resolve().parents[3] / "support" / "asking" / "task_server.py")
EXT = "io.modelcontextprotocol/tasks"
TASKS_META = {**META, "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}}
SUB = "io.modelcontextprotocol/subscriptionId"
LIMIT = 60


async def rpc(agent: Agent, method: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return await agent.rpc(method, {**params, "_meta": TASKS_META}, **kw)


async def listen(agent: Agent, rid: str, task_id: str) -> None:
    await rpc(agent, "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, rid=rid)


def write_config(tmp_path: Path, generation: int, profile: dict[str, Any] | None = None) -> Path:
    """Two servers of tasks, ``jobs`` (its lines read logged to jobs.log) and ``other``;
    ``generation`` is in jobs' environment, so that a new one restarts it on a reload."""
    task_server = json.dumps(sys.executable)
    lines = [
        "[daemon]",
        f"socket = {json.dumps(str(tmp_path / 'mcpd.sock'))}",
        "startup_deadline = 20.0",
        "backoff_base = 0.05",
        "backoff_cap = 0.5",
        "[servers.jobs]",
        f"command = {task_server}",
        f"args = {json.dumps([TASK_SERVER, str(tmp_path / 'jobs.log')])}",
        f'env = {{ TASKS_ANY_ID = "1", GENERATION = "{generation}" }}',
        "[servers.other]",
        f"command = {task_server}",
        f"args = {json.dumps([TASK_SERVER])}",
    ]
    for name, table in (profile or {}).items():
        lines.append(f"[profiles.{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in table.items()]
    path = tmp_path / "mcpd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def served_anew(daemon: Daemon, before: Upstream | None) -> None:
    """Until ``jobs`` is connected in a session other than ``before``."""
    runner = daemon.supervisor.servers["jobs"]
    while runner.upstream is None or runner.upstream is before or runner.phase != "connected":
        await runner.phase_changed()


def told(result: dict[str, Any]) -> str:
    assert result["isError"] is True
    [block] = result["content"]
    text = block["text"]
    assert isinstance(text, str)
    return text


def sent_to_jobs(tmp_path: Path, method: str) -> int:
    lines = (tmp_path / "jobs.log").read_text().splitlines()
    return sum(1 for line in lines if json.loads(line).get("method") == method)


@pytest.mark.parametrize("how", ["killed", "reloaded"])
async def test_an_old_task_id_never_reaches_a_restarted_servers_new_task(
    tmp_path: Path, how: str
) -> None:
    """The restarted server gave another agent's new task the id of the first agent's
    task: the first agent's tasks/get read the other's result, its tasks/cancel
    cancelled the other's task, and its listen was told the other's news."""
    path = write_config(tmp_path, 1)
    sock = str(tmp_path / "mcpd.sock")
    with trio.fail_after(LIMIT):
        async with (
            running(load(path), str(path)) as daemon,
            connect(sock) as first,
            connect(sock) as second,
            trio.open_nursery() as nursery,
        ):
            mine = (await rpc(first, "tools/call", {"name": "mcp__jobs__build"}))["result"]
            assert mine["taskId"] == "jobs:t-1"
            nursery.start_soon(listen, first, "L1", "jobs:t-1")
            await first.wait_notifications(1)
            runner = daemon.supervisor.servers["jobs"]
            before = runner.upstream
            if how == "killed":
                assert runner.process is not None
                os.killpg(runner.process.pid, signal.SIGKILL)
            else:
                write_config(tmp_path, 2)
                report = await daemon.reload()
                assert report.changed == ["jobs"]
            await served_anew(daemon, before)
            theirs = (await rpc(second, "tools/call", {"name": "mcp__jobs__build"}))["result"]
            assert theirs["taskId"] == "jobs:t-1"  # numbered from the start again

            # The first agent's id names its own task still, which went with the session.
            got = (await rpc(first, "tasks/get", {"taskId": "jobs:t-1"}))["result"]
            assert (got["taskId"], got["status"], got["resultType"]) == (
                "jobs:t-1",
                "completed",
                "complete",
            )
            assert "ended after this task began" in told(got["result"])
            assert got["result"]["_meta"]["mcpd/task"] == {"server": "jobs", "ended": "session"}
            cancel = await rpc(first, "tasks/cancel", {"taskId": "jobs:t-1"})
            assert cancel["result"]["status"] == "completed"
            answers = {"confirm": {"action": "accept", "content": {}}}
            update = {"taskId": "jobs:t-1", "inputResponses": answers}
            assert "ended after this task began" in told(
                (await rpc(first, "tasks/update", update))["result"]["result"]
            )
            assert sent_to_jobs(tmp_path, "tasks/cancel") == 0
            assert sent_to_jobs(tmp_path, "tasks/update") == 0
            # Its listen was told so, once, as the session ended.
            [ack, gone] = await first.wait_notifications(2)
            assert ack["params"]["notifications"] == {"taskIds": ["jobs:t-1"]}
            assert gone["method"] == "notifications/tasks"
            assert gone["params"]["_meta"][SUB] == "L1"
            assert gone["params"]["status"] == "completed"
            assert "ended after this task began" in told(gone["params"]["result"])

            # The second agent's task is untouched, and its news is its own.
            nursery.start_soon(listen, second, "L2", "jobs:t-1")
            news = await second.wait_notifications(2)  # its ack, then the task as it is
            assert news[1]["params"]["status"] == "input_required"
            await rpc(second, "tasks/update", update)
            done = (await second.wait_notifications(3))[2]["params"]
            assert (done["taskId"], done["status"]) == ("jobs:t-1", "completed")
            assert done["result"]["content"][0]["text"] == "built, confirmed accept"
            await first.rpc("ping")  # after whatever was written to it before
            assert len(first.notifications) == 2
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("how", ["reloaded", "switched"])
async def test_task_methods_are_refused_once_the_agents_profile_hides_the_server(
    tmp_path: Path, how: str
) -> None:
    """A reload that took the server out of the agent's profile (or the agent's switch
    to a profile without it) still let tasks/get read the task's result and tasks/cancel
    reach the server."""
    both = {"servers": ["jobs", "other"]}
    if how == "reloaded":
        sock = str(tmp_path / "p.sock")
        profiles: dict[str, Any] = {"p": {**both, "socket": sock}}
    else:
        sock = str(tmp_path / "mcpd.sock")
        profiles = {"p": both, "q": {"servers": ["other"]}}
    path = write_config(tmp_path, 1, profiles)
    with trio.fail_after(LIMIT):
        async with running(load(path), str(path)) as daemon, connect(sock) as agent:
            if how == "switched":
                await agent.use_profile("p")
            mine = (await rpc(agent, "tools/call", {"name": "mcp__jobs__build"}))["result"]
            assert mine["taskId"] == "jobs:t-1"
            if how == "reloaded":
                write_config(tmp_path, 1, {"p": {"servers": ["other"], "socket": sock}})
                await daemon.reload()
            else:
                await agent.use_profile("q")
            assert all("jobs" not in tool["name"] for tool in await agent.tools())
            got = (await rpc(agent, "tasks/get", {"taskId": "jobs:t-1"}))["result"]
            assert got["status"] == "completed"
            assert "not in this agent's profile" in told(got["result"])
            assert got["result"]["_meta"]["mcpd/task"] == {"server": "jobs", "ended": "profile"}
            await rpc(agent, "tasks/cancel", {"taskId": "jobs:t-1"})
            assert sent_to_jobs(tmp_path, "tasks/get") == 0
            assert sent_to_jobs(tmp_path, "tasks/cancel") == 0
            if how == "switched":
                # Back in a profile that shows the server: the task ended for this agent.
                await agent.use_profile("p")
                again = (await rpc(agent, "tasks/get", {"taskId": "jobs:t-1"}))["result"]
                assert "not in this agent's profile" in told(again["result"])
                assert sent_to_jobs(tmp_path, "tasks/get") == 0
