"""A reload that stops a server: what becomes of the calls to it meanwhile, when it
starts again, and what the journal says the reload did."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from mcpd.config.load import load
from mcpd.servers.supervisor import RESTARTING
from tests.support.agent import connect, running
from tests.support.procs import read_pid
from tests.support.reloading import toml_server, wait_for, write_config

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
            runners = daemon.supervisor.runners
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
