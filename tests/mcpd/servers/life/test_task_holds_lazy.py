"""A lazy server is not idle while a task of an agent's still runs on it: stopping it
would end the task with its session, and the agent would never read its result. It
stops once the task ended (or no one can read it any more) and its idle time passed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

from mcpd.config.loading.load import load
from mcpd.daemon import Daemon
from tests.support.clients.agent import META, Agent, connect, running

TASK_SERVER = str(Path(__file__).resolve().parents[3] / "support" / "asking" / "task_server.py")
EXT = "io.modelcontextprotocol/tasks"
TASKS_META = {**META, "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}}
IDLE_STOP = 0.2
LIMIT = 60


async def rpc(agent: Agent, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return await agent.rpc(method, {**params, "_meta": TASKS_META})


def write_config(tmp_path: Path) -> Path:
    lines = [
        "[daemon]",
        f"socket = {json.dumps(str(tmp_path / 'mcpd.sock'))}",
        "startup_deadline = 20.0",
        "[servers.jobs]",
        f"command = {json.dumps(sys.executable)}",
        f"args = {json.dumps([TASK_SERVER])}",
        'start = "lazy"',
        f"idle_stop = {IDLE_STOP}",
    ]
    path = tmp_path / "mcpd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def stopped_idle(daemon: Daemon) -> None:
    runner = daemon.supervisor.servers["jobs"]
    while runner.state != "idle":
        await runner.phase_changed()


async def test_a_running_task_keeps_its_lazy_server_until_it_ended(tmp_path: Path) -> None:
    """The server was stopped after its idle time with the task still waiting for its
    agent's answer: the task ended as the session did, its result never came."""
    path = write_config(tmp_path)
    sock = str(tmp_path / "mcpd.sock")
    with trio.fail_after(LIMIT):
        async with running(load(path), str(path)) as daemon, connect(sock) as agent:
            await stopped_idle(daemon)  # its startup discovery is done
            handle = (await rpc(agent, "tools/call", {"name": "mcp__jobs__build"}))["result"]
            assert (handle["taskId"], handle["status"]) == ("jobs:t-1", "input_required")
            # The agent takes its time over the answer: many idle times pass.
            await trio.sleep(10 * IDLE_STOP)
            got = (await rpc(agent, "tasks/get", {"taskId": "jobs:t-1"}))["result"]
            assert got["status"] == "input_required"
            answers = {"confirm": {"action": "accept", "content": {}}}
            await rpc(agent, "tasks/update", {"taskId": "jobs:t-1", "inputResponses": answers})
            done = (await rpc(agent, "tasks/get", {"taskId": "jobs:t-1"}))["result"]
            assert done["status"] == "completed"
            assert done["result"]["content"][0]["text"] == "built, confirmed accept"
            # Ended and read: the idle time runs again, and the server stops.
            await stopped_idle(daemon)


async def test_a_task_no_one_can_read_keeps_no_lazy_server(tmp_path: Path) -> None:
    """Its agent left: no one can name the task again, so it holds the server no more."""
    path = write_config(tmp_path)
    sock = str(tmp_path / "mcpd.sock")
    with trio.fail_after(LIMIT):
        async with running(load(path), str(path)) as daemon:
            await stopped_idle(daemon)
            async with connect(sock) as agent:
                handle = (await rpc(agent, "tools/call", {"name": "mcp__jobs__build"}))["result"]
                assert handle["status"] == "input_required"
                await trio.sleep(10 * IDLE_STOP)
                assert daemon.supervisor.servers["jobs"].state != "idle"
            await stopped_idle(daemon)
