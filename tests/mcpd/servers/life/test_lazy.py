"""``start = "lazy"``: a stdio server started by its first call and stopped when idle,
with agents seeing nothing of it but latency. Real processes, watched by pid."""

from __future__ import annotations

from pathlib import Path

import trio

from mcpd.local.state.statefile import FILE_NAME
from tests.support.clients.agent import connect, make_config, running
from tests.support.daemons.lazy import lazy, state_of, stopped, text
from tests.support.system.procs import alive, read_pid, scripted, wait_gone


async def test_started_by_a_call_and_stopped_when_idle_invisibly(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    cfg = make_config(tmp_path, {"files": lazy(pid_file), "other": lazy(tmp_path / "other")})
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            # One discovery at startup, then the process is stopped again.
            assert await stopped(pid_file)
            async with connect(daemon.socket_path, modern=False) as agent:
                await agent.initialize()
                tools = await agent.tools()
                assert len(tools) == 6
                assert all(t["_meta"]["mcpd/available"] for t in tools)
                assert all(not t["description"].startswith("[unavailable") for t in tools)
                assert await state_of(agent, "files") == "idle"
                async with connect(daemon.socket_path) as modern:
                    found = await modern.result("server/discover")
                    assert "outage" not in found.get("instructions", "")

                pid_file.unlink()
                result = await agent.call("mcp__files__tool1", {"text": "a"})
                assert text(result) == "tool1:a"
                first = await read_pid(pid_file)
                assert alive(first)
                assert await state_of(agent, "files") == "ready"
                # Busy calls keep it running; then idle_stop passes without one.
                for i in range(3):
                    assert (
                        text(await agent.call("mcp__files__tool0", {"text": str(i)}))
                        == f"tool0:{i}"
                    )
                assert await wait_gone(first)
                assert await state_of(agent, "files") == "idle"

                pid_file.unlink()
                result = await agent.call("mcp__files__tool2", {"text": "b"})
                assert text(result) == "tool2:b"
                assert await read_pid(pid_file) != first
                # No list change was ever announced: the stops were invisible.
                assert agent.notifications == []
                listed = await agent.result("tools/list")
                assert all(s["available"] for s in listed["_meta"]["mcpd/servers"])


async def test_concurrent_first_calls_share_one_start(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    log = tmp_path / "log"
    cfg = make_config(tmp_path, {"files": lazy(pid_file, "--log-file", str(log))})
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            assert await stopped(pid_file)
            log.write_text("")
            results: list[str] = []

            async def one(i: int) -> None:
                results.append(text(await agent.call("mcp__files__tool0", {"text": str(i)})))

            async with trio.open_nursery() as nursery:
                for i in range(5):
                    nursery.start_soon(one, i)
            assert sorted(results) == [f"tool0:{i}" for i in range(5)]
            # One process answered them all: a single handshake in its log.
            assert log.read_text().count('"server/discover"') == 1


async def test_saved_tools_mean_no_process_until_the_first_call(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    cfg = make_config(tmp_path, {"files": lazy(pid_file)}, state_dir=str(tmp_path / "state"))
    with trio.fail_after(60):
        async with running(cfg):
            assert await stopped(pid_file)
        assert (tmp_path / "state" / FILE_NAME).exists()
        pid_file.unlink()
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            tools = await agent.tools()
            assert len(tools) == 3 and all(t["_meta"]["mcpd/available"] for t in tools)
            assert not pid_file.exists()  # known from the state file: nothing was started
            assert text(await agent.call("mcp__files__tool0", {"text": "x"})) == "tool0:x"
            assert pid_file.exists()


async def test_a_lazy_server_that_cannot_start_is_an_outage(tmp_path: Path) -> None:
    flag = tmp_path / "down"
    command, args = scripted("--pid-file", str(tmp_path / "pid"))
    script = 'test -e "$0" && { echo "cannot start now" >&2; exit 4; }; exec "$@"'
    server = {
        "command": "/bin/sh",
        "args": ["-c", script, str(flag), command, *args],
        "start": "lazy",
        "idle_stop": 0.3,
    }
    cfg = make_config(tmp_path, {"files": server})
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            assert await stopped(tmp_path / "pid")
            while await state_of(agent, "files") != "idle":
                await trio.sleep(0.05)
            flag.touch()
            result = await agent.call("mcp__files__tool0", {"text": "x"})
            assert result["isError"] is True
            assert "exited with status 4" in text(result)
            tools = await agent.tools()
            assert not any(t["_meta"]["mcpd/available"] for t in tools)
            # Once it can start again, the supervisor's retry brings it back.
            flag.unlink()
            while await state_of(agent, "files") not in ("ready", "idle"):
                await trio.sleep(0.05)
            assert text(await agent.call("mcp__files__tool0", {"text": "y"})) == "tool0:y"
