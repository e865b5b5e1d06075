"""A server's list asked for again that fails (a JSON-RPC error, a page that is no
list) while the server is up: the list it gave before is served, the call in flight on
it is answered by it, the server is not started anew, and the journal and ``mcpd
status`` say which list failed and why; once it lists again, the new list is taken."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.daemons.pins import heard
from tests.support.daemons.reloading import wait_for
from tests.support.parts.status_rows import status_text

SERVER = str(Path(__file__).parents[3] / "support" / "servers" / "list_failing.py")
LISTS = ("tools/list", "prompts/list", "resources/list")
WHY = {
    "error": 'the error "temporarily unavailable"',
    "page": "bad tools/list result: Expected `array`, got `str` - at `$.tools`",
}


class Journal(logging.Handler):
    """Sets ``said`` once the journal says each list of ``lf`` failed, or the server
    had an outage (which the session's end would be)."""

    def __init__(self) -> None:
        super().__init__()
        self.said = trio.Event()
        self.failed: dict[str, str] = {}
        self.outages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        for method in LISTS:
            if text.startswith(f"lf: {method} failed: "):
                self.failed[method] = text
        if record.__dict__.get("mcpd_event") == "outage":
            self.outages.append(text)
        if len(self.failed) == len(LISTS) or self.outages:
            self.said.set()


async def listed(agent: Agent) -> dict[str, Any]:
    tools = sorted(t["name"] for t in await agent.tools())
    prompts = (await agent.result("prompts/list"))["prompts"]
    resources = (await agent.result("resources/list"))["resources"]
    return {"tools": tools, "prompts": prompts, "resources": resources}


async def status_of(agent: Agent) -> tuple[dict[str, Any], str]:
    status = await agent.result("mcpd/status")
    (row,) = [s for s in status["servers"] if s["alias"] == "lf"]
    return row, status_text(status)


@pytest.mark.parametrize("how", ["error", "page"])
async def test_a_list_that_fails_when_asked_for_again_keeps_the_list_and_the_call_in_flight(
    tmp_path: Path, how: str
) -> None:
    requests = tmp_path / "requests"
    servers = {"lf": {"command": sys.executable, "args": [SERVER, str(requests), how]}}
    journal = Journal()
    logger = logging.getLogger("mcpd")
    logger.addHandler(journal)
    try:
        with trio.fail_after(60):
            async with (
                running(make_config(tmp_path, servers)) as daemon,
                connect(daemon.socket_path) as agent,
                connect(daemon.socket_path) as caller,
            ):
                await agent.initialize()
                await caller.initialize()
                before = await listed(agent)
                row, _ = await status_of(agent)
                pid = row["pid"]
                answered: list[dict[str, Any]] = []
                async with trio.open_nursery() as nursery:

                    async def slow() -> None:
                        answered.append(await caller.call("mcp__lf__slow"))

                    nursery.start_soon(slow)
                    await journal.said.wait()
                    assert journal.outages == []
                    assert not answered
                    assert await listed(agent) == before
                    row, shown = await status_of(agent)
                    assert row["state"] == "ready" and row["pid"] == pid
                    assert "held back| since " in shown
                    assert f"tools/list failed: {WHY[how]}; the tools it listed before" in shown
                    echoed = await agent.call("mcp__lf__echo", {"text": "still"})
                    assert echoed["content"] == [{"type": "text", "text": "echo:still"}]
                    await agent.call("mcp__lf__release")
                # The call in flight as its lists failed was answered by the server.
                assert answered[0]["content"] == [{"type": "text", "text": "slow:done"}]
                assert not answered[0].get("isError")
                since = len(agent.notifications)
                await agent.call("mcp__lf__mend")
                await heard(agent, since, ("notifications/tools/list_changed",))
                assert "mcp__lf__later" in (await listed(agent))["tools"]
                row, shown = await status_of(agent)
                assert row["pid"] == pid
        assert requests.read_text().splitlines().count("initialize") == 1
        said = journal.failed["tools/list"]
        assert said == (
            f"lf: tools/list failed: {WHY[how]}; the tools it listed before are served, "
            "and its list is asked for again when it next announces a change or its ttl "
            "runs out"
        )
        why = WHY[how].replace("tools", "prompts")
        assert journal.failed["prompts/list"].startswith(f"lf: prompts/list failed: {why}; ")
    finally:
        logger.removeHandler(journal)


async def test_prompts_that_fail_from_the_start_are_shown_and_take_nothing_else_with_them(
    tmp_path: Path,
) -> None:
    requests = tmp_path / "requests"
    servers = {"lf": {"command": sys.executable, "args": [SERVER, str(requests), "prompts"]}}

    def said(method: str) -> int:
        return requests.read_text().splitlines().count(method) if requests.exists() else 0

    with trio.fail_after(60):
        async with (
            running(make_config(tmp_path, servers)) as daemon,
            connect(daemon.socket_path, modern=False) as agent,
        ):
            await agent.initialize()
            lists = await listed(agent)
            assert lists["prompts"] == []
            [resource] = lists["resources"]
            row, shown = await status_of(agent)
            assert row["state"] == "ready"
            assert 'prompts/list failed: the error "no prompts today"' in shown
            assert "held back| since " in shown
            # Its resources' updates are asked for again when it is started anew.
            assert (await agent.rpc("resources/subscribe", {"uri": resource["uri"]}))[
                "result"
            ] == {}
            await wait_for(lambda: said("resources/subscribe") == 1)
            await agent.call("mcp__lf__exit")
            await wait_for(lambda: said("initialize") == 2 and said("resources/subscribe") == 2)
            row, shown = await status_of(agent)
            assert row["restarts"] == 1
            assert 'prompts/list failed: the error "no prompts today"' in shown
