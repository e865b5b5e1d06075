"""A reload that stops a server: what becomes of the calls to it meanwhile, when it
starts again, and what the journal says the reload did."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.loading.load import load
from mcpd.servers.supervisor import RESTARTING
from tests.support.clients.agent import connect, running
from tests.support.daemons.reloading import toml_server, wait_for, write_config
from tests.support.system.procs import read_pid

ONE_AT_A_TIME = "max_concurrency = 1\n"


def calls_sent(log: Path) -> int:
    return sum('"tools/call"' in line for line in log.read_text().splitlines())


def in_background(
    nursery: trio.Nursery, into: list[Any], work: Callable[[], Awaitable[Any]]
) -> None:
    async def run() -> None:
        into.append(await work())

    nursery.start_soon(run)


async def test_a_call_waiting_for_a_slot_is_not_sent_to_a_server_stopping_to_restart(
    tmp_path: Path,
) -> None:
    """The server runs one call at a time: one runs, one waits. A reload changes the
    server, whose stop waits for the running call; the waiting one is told the server
    restarts, and is never sent to it (the stop would cut it short half done)."""
    pidfile, log = tmp_path / "one.pid", tmp_path / "one.in"
    config_path, sock = tmp_path / "mcpd.toml", tmp_path / "mcpd.sock"
    flags = ("--hang-on-call", "--log-file", str(log))
    write_config(
        config_path,
        sock,
        {"one": toml_server(pidfile, *flags) + ONE_AT_A_TIME},
        "call_timeout = 600",
    )
    with trio.fail_after(60):
        async with (
            running(load(config_path), str(config_path)) as daemon,
            connect(str(sock)) as agent,
            connect(str(sock)) as waiting_agent,
            trio.open_nursery() as nursery,
        ):
            await read_pid(pidfile)
            runners = daemon.supervisor.servers
            hanging = trio.CancelScope()

            async def long_call() -> None:
                with hanging:
                    async with connect(str(sock)) as other:
                        await other.call("mcp__one__tool0", {"text": "first"})

            nursery.start_soon(long_call)
            await wait_for(lambda: runners["one"].inflight == 1)
            waited: list[dict[str, Any]] = []
            in_background(
                nursery, waited, lambda: waiting_agent.call("mcp__one__tool1", {"text": "next"})
            )
            await wait_for(lambda: runners["one"].waiting == 1)
            changed = toml_server(pidfile, *flags, "--tools", "4") + ONE_AT_A_TIME
            write_config(config_path, sock, {"one": changed}, "call_timeout = 600")
            reports: list[dict[str, Any]] = []
            in_background(nursery, reports, lambda: agent.result("mcpd/reload"))
            await wait_for(lambda: "one" not in runners)
            # The running call's agent leaves: its slot is free while the server stops.
            hanging.cancel()
            await wait_for(lambda: reports and waited)
        [result] = waited
        assert result["isError"] is True
        assert RESTARTING in result["content"][0]["text"]
        assert calls_sent(log) == 1
        assert reports[0]["changed"] == ["one"]


async def test_a_changed_server_starts_again_once_its_own_calls_are_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two servers change: one holds a long call, the other none. The other starts
    again at once, and takes calls while the first still waits for its call; neither is
    ever said to be removed."""
    caplog.set_level(logging.INFO)
    pid = {name: tmp_path / f"{name}.pid" for name in ("slow", "quick")}
    config_path, sock = tmp_path / "mcpd.toml", tmp_path / "mcpd.sock"
    servers = {
        "slow": toml_server(pid["slow"], "--hang-on-call"),
        "quick": toml_server(pid["quick"]),
    }
    write_config(config_path, sock, servers, "call_timeout = 600")
    with trio.fail_after(60):
        async with (
            running(load(config_path), str(config_path)) as daemon,
            connect(str(sock)) as agent,
            trio.open_nursery() as nursery,
        ):
            await read_pid(pid["slow"])
            await read_pid(pid["quick"])
            supervisor = daemon.supervisor
            hanging = trio.CancelScope()

            async def long_call() -> None:
                with hanging:
                    async with connect(str(sock)) as other:
                        await other.call("mcp__slow__tool0", {"text": "x"})

            nursery.start_soon(long_call)
            await wait_for(lambda: supervisor.servers["slow"].inflight == 1)
            changed = {a: body + "call_timeout = 500\n" for a, body in servers.items()}
            write_config(config_path, sock, changed, "call_timeout = 600")
            reports: list[dict[str, Any]] = []
            in_background(nursery, reports, lambda: agent.result("mcpd/reload"))
            await wait_for(lambda: "slow" not in supervisor.servers)
            # The quick one is past its own stop: back, or (were it left down until
            # the slow one's call ends) no longer said to be restarting.
            await wait_for(
                lambda: "quick" in supervisor.servers or supervisor.absent("quick") != RESTARTING
            )
            quick = await agent.call("mcp__quick__tool0", {"text": "meanwhile"})
            assert quick["content"][0]["text"] == "tool0:meanwhile"
            assert reports == []
            hanging.cancel()
            await wait_for(lambda: reports)
        assert reports[0]["changed"] == ["quick", "slow"]
        said = "\n".join(r.getMessage() for r in caplog.records)
        assert "removed from the configuration" not in said


async def test_the_journal_names_what_a_reload_did(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "mcpd.supervisor")
    pid = {name: tmp_path / f"{name}.pid" for name in ("keep", "change", "gone")}
    config_path, sock = tmp_path / "mcpd.toml", tmp_path / "mcpd.sock"
    servers = {name: toml_server(path) for name, path in pid.items()}
    write_config(config_path, sock, servers)
    # Many servers added: named up to a point, the rest counted.
    lazy = {
        f"new{i:02}": toml_server(tmp_path / f"new{i}.pid") + 'start = "lazy"\n' for i in range(11)
    }
    with trio.fail_after(60):
        async with (
            running(load(config_path), str(config_path)),
            connect(str(sock)) as agent,
        ):
            for path in pid.values():
                await read_pid(path)
            del servers["gone"]
            servers["change"] += "call_timeout = 9\n"
            write_config(config_path, sock, servers | lazy, "call_timeout = 20")
            await agent.result("mcpd/reload")
    [line] = [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith("configuration reloaded")
    ]
    assert line == (
        "configuration reloaded: added new00, new01, new02, new03, new04, new05, new06, new07"
        " and 3 more; removed gone; restarted (changed) change; 1 unchanged;"
        " in force now: daemon.call_timeout"
    )


async def test_a_lower_list_limit_applies_to_the_lists_held(tmp_path: Path) -> None:
    """``max_list_items`` lowered for every server: the servers that take it list
    again under it, so what agents are shown keeps within it."""
    pidfile = tmp_path / "many.pid"
    config_path, sock = tmp_path / "mcpd.toml", tmp_path / "mcpd.sock"
    servers = {"many": toml_server(pidfile, "--tools", "5")}
    write_config(config_path, sock, servers)
    with trio.fail_after(60):
        async with (
            running(load(config_path), str(config_path)) as daemon,
            connect(str(sock)) as agent,
        ):
            await read_pid(pidfile)
            assert len(await agent.tools()) == 5
            write_config(config_path, sock, servers, "max_list_items = 2")
            report = await agent.result("mcpd/reload")
            assert report["settings"] == ["daemon.max_list_items"]
            assert report["changed"] == ["many"]
            await wait_for(lambda: daemon.catalog.count("many") == 2)
            assert len(await agent.tools()) == 2
