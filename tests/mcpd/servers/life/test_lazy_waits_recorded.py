"""How long an agent waited for a call, its audit record says: from the call's arrival to
its outcome, a wait for its server to start (a lazy server's first call, or one that
came while the server was still being stopped) or for a free slot included."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import trio

from mcpd.audit.reader import AuditRecords
from mcpd.audit.record import CallRecord
from tests.support.clients.agent import connect, make_config, running
from tests.support.daemons.lazy import lazy, state_of, stopped, text
from tests.support.system.procs import read_pid, scripted, wait_gone


def config(tmp_path: Path, server: dict[str, Any], **daemon: Any) -> Any:
    state = str(tmp_path / "state")
    return make_config(tmp_path, {"files": server}, state_dir=state, audit_journal=False, **daemon)


def calls(tmp_path: Path) -> list[CallRecord]:
    records = AuditRecords(str(tmp_path / "state"))
    return sorted((r for r in records if r.method == "tools/call"), key=lambda r: r.ts)


async def timed(answer: Awaitable[dict[str, Any]]) -> tuple[dict[str, Any], float]:
    """The answer, and how long the agent waited for it, in ms."""
    began = time.monotonic()
    result = await answer
    return result, (time.monotonic() - began) * 1000


async def test_a_call_that_started_a_lazy_server_records_the_start(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    cfg = config(tmp_path, lazy(pid_file, "--start-delay", "1.0"))
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            assert await stopped(pid_file)
            async with connect(daemon.socket_path) as agent:
                await agent.initialize()
                result, waited = await timed(agent.call("mcp__files__tool1", {"text": "a"}))
                assert text(result) == "tool1:a"
            await daemon.audit.flush()
    [record] = calls(tmp_path)
    assert waited >= 1000
    assert record.outcome == "ok"
    assert record.duration_ms >= 1000


async def test_a_call_that_came_while_its_lazy_server_stopped_records_the_restart(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    # It stays after its stdin closes, so its stop takes the stdin grace: a call that
    # comes meanwhile waits for that stop and the next start.
    cfg = config(tmp_path, lazy(pid_file, "--linger", idle_stop=0.3))
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            async with connect(daemon.socket_path) as agent:
                await agent.initialize()
                assert await stopped(pid_file)
                pid_file.unlink()
                assert text(await agent.call("mcp__files__tool1", {"text": "a"})) == "tool1:a"
                first = await read_pid(pid_file)
                pid_file.unlink()
                while await state_of(agent, "files") != "idle":
                    await trio.sleep(0.05)
                result, waited = await timed(agent.call("mcp__files__tool1", {"text": "b"}))
                assert text(result) == "tool1:b"
                assert await read_pid(pid_file) != first
                assert await wait_gone(first)
            await daemon.audit.flush()
    *_, record = calls(tmp_path)
    assert waited >= 500
    assert record.outcome == "ok"
    assert record.duration_ms >= waited * 0.9


async def test_a_call_that_waited_for_a_slot_records_the_wait(tmp_path: Path) -> None:
    command, args = scripted("--slow", "0.8")
    server = {"command": command, "args": list(args), "max_concurrency": 1}
    with trio.fail_after(60):
        async with running(config(tmp_path, server)) as daemon:
            async with connect(daemon.socket_path) as one, connect(daemon.socket_path) as two:
                await one.initialize()
                await two.initialize()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(one.call, "mcp__files__tool0", {"text": "a"})
                    await trio.sleep(0.2)
                    result, waited = await timed(two.call("mcp__files__tool1", {"text": "b"}))
                assert text(result) == "tool1:b"
            await daemon.audit.flush()
    first, second = calls(tmp_path)
    assert first.name == "mcp__files__tool0"
    assert waited >= 1200
    assert second.name == "mcp__files__tool1"
    assert second.duration_ms >= waited * 0.9


async def test_a_call_to_a_server_still_starting_records_the_start(tmp_path: Path) -> None:
    command, args = scripted("--start-delay", "1.0")
    server = {"command": command, "args": list(args)}
    # Its tools are known from the run before, so a call waits for it to come up.
    async with running(config(tmp_path, server)):
        pass
    with trio.fail_after(60):
        async with running(config(tmp_path, server, startup_deadline=0.1)) as daemon:
            async with connect(daemon.socket_path) as agent:
                await agent.initialize()
                result, waited = await timed(agent.call("mcp__files__tool1", {"text": "a"}))
                assert text(result) == "tool1:a"
            await daemon.audit.flush()
    [record] = calls(tmp_path)
    assert waited >= 500
    assert record.outcome == "ok"
    assert record.duration_ms >= waited * 0.9
