"""Supervision with real processes: hanging, crashing, crash-looping, unreachable and
recovering servers next to a steady one that must not notice any of it."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.daemons.supervision import closed_port, server, text, wait_state
from tests.support.system.procs import read_pid, scripted


def flaky_server(tmp_path: Path, failures: int) -> dict[str, Any]:
    """Exits at start ``failures`` times, then runs the scripted server."""
    counter = tmp_path / "starts"
    command, args = scripted()
    script = tmp_path / "flaky.py"
    script.write_text(
        "import os, sys\n"
        f"p = {str(counter)!r}\n"
        "n = int(open(p).read()) if os.path.exists(p) else 0\n"
        "open(p, 'w').write(str(n + 1))\n"
        f"if n < {failures}:\n"
        "    print('not today', file=sys.stderr); sys.exit(4)\n"
        f"os.execv({command!r}, [{command!r}, *{list(args)!r}])\n"
    )
    return {"command": sys.executable, "args": [str(script)]}


async def steady_calls(agent: Agent, stop: trio.Event, tally: dict[str, int]) -> None:
    """Call the steady server until told to stop; count outcomes."""
    i = 0
    while not stop.is_set():
        result = await agent.call("mcp__steady__tool0", {"text": str(i)})
        tally["ok" if text(result) == f"tool0:{i}" else "wrong"] += 1
        i += 1


async def test_failing_servers_do_not_disturb_a_steady_one(tmp_path: Path) -> None:
    cfg = make_config(
        tmp_path,
        {
            "steady": server(),
            "hangs": server("--hang-on-call"),
            "crashes": server("--die-on-call"),
            "loops": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(2)"]},
            "refused": {"url": f"http://127.0.0.1:{closed_port()}/mcp"},
            "flaky": flaky_server(tmp_path, failures=2),
        },
        call_timeout=1.0,
        max_restarts=3,
        backoff_base=0.05,
        backoff_cap=0.3,
        failure_threshold=2,
        cooldown_base=0.5,
        probe_timeout=1.0,
    )
    tally = {"ok": 0, "wrong": 0}
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            stop = trio.Event()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(steady_calls, agent, stop, tally)

                hung = await agent.call("mcp__hangs__tool0")
                assert hung["isError"] is True
                assert hung["_meta"]["mcpd/outage"]["reason"] == (
                    "no answer within 1 s (the limit daemon.call_timeout sets)"
                )

                crashed = await agent.call("mcp__crashes__tool0")
                assert crashed["isError"] is True
                assert "exited with status 3" in text(crashed)

                looping = await wait_state(agent, "loops", "crash_loop")
                assert looping["restarts"] >= 3
                result = await agent.call("mcp__loops__nothing")
                assert result["isError"] is True  # never listed: unknown name

                refused = await wait_state(agent, "refused", "unreachable")
                assert "refused" in refused["last_error"].lower()

                recovered = await wait_state(agent, "flaky", "ready")
                assert recovered["tools"] == 3
                assert text(await agent.call("mcp__flaky__tool1", {"text": "back"})) == "tool1:back"
                stop.set()
            assert agent.unmatched == []
    assert tally["wrong"] == 0
    assert tally["ok"] > 0


async def test_a_crashing_stdio_server_is_restarted(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    cfg = make_config(
        tmp_path,
        {"crashes": server("--die-on-call", "--pid-file", str(pidfile))},
        backoff_base=0.01,
        backoff_cap=0.05,
        failure_threshold=50,
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            first = await read_pid(pidfile)
            pidfile.unlink()
            result = await agent.call("mcp__crashes__tool0")
            assert result["_meta"]["mcpd/outage"]["server"] == "crashes"
            second = await read_pid(pidfile)
            assert second != first
            status = await wait_state(agent, "crashes", "ready", "degraded")
            assert status["restarts"] >= 1


async def test_a_stdio_server_that_dies_on_every_call_opens_its_circuit(tmp_path: Path) -> None:
    """Starting again (connecting, listing) is no successful call: the calls that each
    killed the server are consecutive failures, and open the circuit at the threshold."""
    cfg = make_config(
        tmp_path,
        {"dies": server("--die-on-call")},
        backoff_base=0.01,
        backoff_cap=0.05,
        max_restarts=50,
        failure_threshold=2,
        cooldown_base=60.0,
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            for restarts in range(2):
                # Served again after each death (the restart counted first).
                while (await wait_state(agent, "dies", "ready", "degraded"))["restarts"] < restarts:
                    await trio.sleep(0.05)
                died = await agent.call("mcp__dies__tool0")
                assert "exited with status 3" in text(died)
            row = await wait_state(agent, "dies", "open")
            assert row["breaker"]["opened"] == 1
            refused = await agent.call("mcp__dies__tool0")
            assert refused["_meta"]["mcpd/outage"]["state"] == "open"
            assert refused["_meta"]["mcpd/outage"]["retry_at"] is not None


async def test_unavailable_tools_stay_listed_and_are_marked(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    # After the first death the server stays down for a while (long backoff).
    cfg = make_config(
        tmp_path, {"notes": server("--pid-file", str(pidfile))}, backoff_base=30.0, backoff_cap=30.0
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            assert len(await agent.tools()) == 3
            os.kill(await read_pid(pidfile), signal.SIGKILL)
            await wait_state(agent, "notes", "failed")
            listed = await agent.result("tools/list")
            assert len(listed["tools"]) == 3
            for tool in listed["tools"]:
                assert tool["_meta"]["mcpd/available"] is False
                assert tool["description"].startswith("[unavailable: notes is down since")
            state = listed["_meta"]["mcpd/servers"][0]
            assert state["server"] == "notes" and state["available"] is False
            assert "SIGKILL" in state["reason"] and state["retry_at"]
            found = await agent.result("server/discover")
            assert "Current outages:" in found["instructions"]
            assert "'notes' is unavailable" in found["instructions"]
            result = await agent.call("mcp__notes__tool0")
            outage = result["_meta"]["mcpd/outage"]
            assert outage["state"] == "failed" and outage["retry_at"] and outage["since"]


async def test_servers_never_reached_appear_in_the_states(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"ghost": {"command": "/nonexistent/server"}})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            listed = await agent.result("tools/list")
            assert listed["tools"] == []
            (state,) = listed["_meta"]["mcpd/servers"]
            assert state["server"] == "ghost" and state["available"] is False
            assert "command not found" in state["reason"]


async def start_tickets(port: int, ready: Path) -> trio.Process:
    ready.unlink(missing_ok=True)
    proc = await trio.lowlevel.open_process(
        [
            sys.executable,
            "-m",
            "mcpd.demo.tickets",
            "--http",
            f"127.0.0.1:{port}",
            "--ready-file",
            str(ready),
        ]
    )
    while not ready.exists() or not ready.read_text().strip():
        await trio.sleep(0.02)
    return proc


async def test_an_http_endpoint_that_goes_away_is_marked_and_comes_back(tmp_path: Path) -> None:
    port = closed_port()
    ready = tmp_path / "ready"
    with trio.fail_after(60):
        proc = await start_tickets(port, ready)
        cfg = make_config(
            tmp_path,
            {"tickets": {"url": f"http://127.0.0.1:{port}/mcp"}},
            backoff_base=0.2,
            backoff_cap=0.5,
        )
        try:
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                found = await agent.call("mcp__tickets__search", {"query": "login"})
                assert found.get("isError") is not True
                proc.kill()
                await proc.wait()
                failed = await agent.call("mcp__tickets__search", {"query": "login"})
                assert failed["isError"] is True
                assert failed["_meta"]["mcpd/outage"]["server"] == "tickets"
                # One failed call is enough to find out the endpoint is gone.
                down = await wait_state(agent, "tickets", "unreachable")
                assert down["last_error"]
                tools = (await agent.result("tools/list"))["tools"]
                assert tools and all(t["_meta"]["mcpd/available"] is False for t in tools)
                proc = await start_tickets(port, ready)
                # Reached again: ``degraded`` for ``stable_after`` after the call that failed.
                await wait_state(agent, "tickets", "ready", "degraded")
                back = await agent.call("mcp__tickets__search", {"query": "login"})
                assert back.get("isError") is not True
        finally:
            proc.kill()


async def test_a_remote_server_back_after_many_attempts_is_not_held_to_the_cap(
    tmp_path: Path,
) -> None:
    # More failed attempts than max_restarts within crash_window: for a child process
    # that is a crash loop, retried every backoff_cap; a remote server that could not
    # be reached for a moment is tried again as its backoff grows, not after 300 s.
    port = closed_port()
    cfg = make_config(
        tmp_path,
        {"tickets": {"url": f"http://127.0.0.1:{port}/mcp"}},
        backoff_base=0.05,
        backoff_cap=300.0,
        max_restarts=3,
    )
    proc = None
    try:
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            runner = daemon.supervisor.servers["tickets"]
            first = await wait_state(agent, "tickets", "unreachable")
            with trio.fail_after(30):
                while runner.policy.failures <= 3 or runner.policy.restarts <= first["restarts"]:
                    await trio.sleep(0.02)
            assert not runner.policy.in_crash_loop
            later = await wait_state(agent, "tickets", "unreachable")
            assert later["retry_at"]
            # Down since the outage began, not since the last retry.
            assert later["since"] == first["since"] and later["restarts"] > first["restarts"]
            proc = await start_tickets(port, tmp_path / "ready")
            with trio.fail_after(30):  # far short of the 300 s cap
                await wait_state(agent, "tickets", "ready")
    finally:
        if proc is not None:
            proc.kill()


async def test_an_idle_http_server_that_goes_away_is_noticed_without_a_call(
    tmp_path: Path,
) -> None:
    port = closed_port()
    ready = tmp_path / "ready"
    with trio.fail_after(60):
        proc = await start_tickets(port, ready)
        cfg = make_config(
            tmp_path,
            {"tickets": {"url": f"http://127.0.0.1:{port}/mcp"}},
            health_interval=0.3,
            backoff_base=5.0,
            backoff_cap=10.0,
        )
        try:
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                await wait_state(agent, "tickets", "ready")
                proc.kill()
                await proc.wait()
                down = await wait_state(agent, "tickets", "unreachable")
                assert down["calls"] == 0  # found out by the health check alone
                tools = (await agent.result("tools/list"))["tools"]
                assert all(t["_meta"]["mcpd/available"] is False for t in tools)
        finally:
            proc.kill()


async def test_logging_out_of_a_server_that_needs_no_login_changes_nothing(
    tmp_path: Path,
) -> None:
    port = closed_port()
    with trio.fail_after(60):
        proc = await start_tickets(port, tmp_path / "ready")
        state = tmp_path / "state"
        cfg = make_config(
            tmp_path, {"tickets": {"url": f"http://127.0.0.1:{port}/mcp"}}, state_dir=str(state)
        )
        try:
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                await wait_state(agent, "tickets", "ready")
                (row,) = (await agent.result("mcpd/auth/status"))["servers"]
                assert row["state"] == "no_login"  # not "not_logged_in": nothing to log in to
                out = await agent.result("mcpd/auth/logout", {"server": "tickets"})
                assert out["had_tokens"] is False and out["revoked"] == []
                # Still served: not sent to needs_login, which no login could end.
                found = await agent.call("mcp__tickets__search", {"query": "login"})
                assert found.get("isError") is not True, found
                assert (await wait_state(agent, "tickets", "ready", "needs_login"))[
                    "state"
                ] == "ready"
                assert not (state / "oauth").exists() or not list((state / "oauth").iterdir())
        finally:
            proc.kill()


async def test_a_command_that_cannot_start_is_failed_not_a_crash_loop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # It is retried as slowly as a crash loop, but it never ran, so it never crashed.
    cfg = make_config(
        tmp_path,
        {"ghost": {"command": str(tmp_path / "no-such-server")}},
        backoff_base=0.05,
        backoff_cap=30.0,
        max_restarts=3,
    )
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            runner = daemon.supervisor.servers["ghost"]
            while not runner.policy.in_crash_loop:
                await trio.sleep(0.02)
            row = await wait_state(agent, "ghost", "failed", "crash_loop")
            assert row["state"] == "failed" and "command not found" in row["last_error"]
    said = [r.getMessage() for r in caplog.records]
    assert any("still cannot start after 3 attempts" in m for m in said), said
    assert not any("crash loop" in m for m in said), said
