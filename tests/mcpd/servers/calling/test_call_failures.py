"""What a tools/call that runs out of time does to its server, through a running daemon
and a real server: one agent's calls of a tool that never answers, at a server that
answers everyone else, end as that agent's timeouts and close the server to nobody; a
server that answers nothing at all is an outage, and its circuit breaker opens."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio

from mcpd.config.tables.model import Config
from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.daemons.fault_harness import HOSTILE_STDIO
from tests.support.daemons.supervision import text, wait_restarted_on_trial, wait_state

TIMED_OUT = "no answer within 1 s (the limit servers.s.call_timeout sets)"


def config(tmp_path: Path, cooldown_base: float = 60.0) -> Config:
    hostile = {"command": sys.executable, "args": [HOSTILE_STDIO], "call_timeout": 1.0}
    return make_config(tmp_path, {"s": hostile}, failure_threshold=3, cooldown_base=cooldown_base)


async def calls(agent: Agent, tool: str, count: int) -> list[dict[str, Any]]:
    """``count`` calls of ``tool`` at once, each one's result."""
    results: list[dict[str, Any]] = []

    async def one(i: int) -> None:
        results.append(await agent.call(f"mcp__s__{tool}", {"text": str(i)}))

    async with trio.open_nursery() as nursery:
        for i in range(count):
            nursery.start_soon(one, i)
    return results


def timed_out(results: list[dict[str, Any]]) -> bool:
    return all(r["isError"] and TIMED_OUT in text(r) for r in results)


async def echo(agent: Agent, said: str) -> str:
    result = await agent.call("mcp__s__echo", {"text": said})
    assert not result.get("isError"), result
    return text(result)


async def meanwhile(slow: Agent, other: Agent) -> tuple[list[dict[str, Any]], int]:
    """``slow``'s calls that never end, while ``other`` keeps calling a quick tool:
    their results, and how many of ``other``'s calls were answered meanwhile."""
    done = trio.Event()
    answered = 0

    async def keep_calling() -> None:
        nonlocal answered
        while not done.is_set():
            assert await echo(other, str(answered)) == f"echo:{answered}"
            answered += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(keep_calling)
        results = await calls(slow, "never", 3)
        done.set()
    return results, answered


async def test_one_agents_calls_out_of_time_leave_the_server_to_the_others(
    tmp_path: Path,
) -> None:
    with trio.fail_after(60):
        async with running(config(tmp_path)) as daemon:
            path = daemon.socket_path
            async with connect(path) as slow, connect(path) as other:
                await wait_state(other, "s", "ready")
                # As many as open the breaker, with nothing else asked of the server
                # meanwhile: it answers the probe that follows.
                assert timed_out(await calls(slow, "never", 3))
                assert await echo(other, "after") == "echo:after"
                # Round after round, with the other agent's calls answered meanwhile.
                for _ in range(2):
                    results, answered = await meanwhile(slow, other)
                    assert timed_out(results) and answered
                assert await echo(other, "last") == "echo:last"
                row = await wait_state(other, "s", "ready")
                assert row["breaker"]["opened"] == 0 and row["breaker"]["failures"] == 0


async def test_a_server_whose_calls_all_run_out_of_time_shows_it(tmp_path: Path) -> None:
    """No failure of the server's, which answers its probe, but no call works either:
    ``degraded``, with the timeout as its last error, until a call succeeds."""
    with trio.fail_after(60):
        async with running(config(tmp_path)) as daemon, connect(daemon.socket_path) as agent:
            await wait_state(agent, "s", "ready")
            assert timed_out(await calls(agent, "never", 2))
            row = await wait_state(agent, "s", "degraded")
            assert row["last_error"] == TIMED_OUT
            assert row["breaker"]["state"] == "closed" and row["breaker"]["failures"] == 0
            assert await echo(agent, "x") == "echo:x"
            row = await wait_state(agent, "s", "ready")
            assert row["last_error"] is None


async def test_a_server_that_answers_nothing_opens_its_breaker(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running(config(tmp_path, cooldown_base=4.0)) as daemon:
            path = daemon.socket_path
            async with connect(path) as slow, connect(path) as other:
                await wait_state(other, "s", "ready")
                # The first of them stops the server answering anything, a probe too.
                assert timed_out(await calls(slow, "freeze", 3))
                row = await wait_restarted_on_trial(other, "s")
                assert row["breaker"]["opened"] == 1 and row["last_error"] == TIMED_OUT
                # Started anew and probed, it is there: its next call decides, and is
                # answered.
                assert await echo(other, "x") == "echo:x"
                row = await wait_state(other, "s", "ready")
                assert row["last_error"] is None
