"""The daemon's own part in its parts' wiring, in process: a start refused for a profile
that matches no tool ends with that error alone and no socket left, a stop asked for
before the start is done ends it and lets what waits for the start go on, a process is
named by the server it is, and the endpoint's token handed out is masked in what
servers send, a new one too once it is handed out."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.loading.paths import state_directory
from mcpd.config.tables.model import ConfigError
from mcpd.daemon import Daemon
from mcpd.local.state.endpoint_token import new_token, write_token
from mcpd.policy.redaction.masking import marker
from tests.support.clients.agent import connect, make_config, running
from tests.support.system.procs import scripted

LIMIT = 60
TOKEN_MARK = marker("the HTTP endpoint's token")


def server(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


async def test_a_start_refused_for_a_profile_matching_no_tool_ends_with_that_error_alone(
    tmp_path: Path,
) -> None:
    cfg = make_config(
        tmp_path,
        {"notes": server("--tools", "2")},
        profiles={"mail": {"tools": {"allow": ["mcp__notes__send*"]}}},
    )
    daemon = Daemon(cfg)
    with trio.fail_after(LIMIT), pytest.raises(ConfigError) as refused:
        await daemon.run()  # as serve() runs it, to say the error and exit with it
    assert str(refused.value) == (
        'profiles.mail.tools: matches no tool of notes: "mcp__notes__send*" matches none of them'
    )
    assert not daemon.started.is_set()
    assert not os.path.exists(cfg.socket_path())
    assert daemon.supervisor.processes() == {}


async def test_a_stop_asked_for_before_the_start_is_done_ends_it(tmp_path: Path) -> None:
    """As a SIGTERM while a server has not answered yet: what waits for the start is let
    go, nothing is served, and the socket file goes."""
    cfg = make_config(tmp_path, {"deaf": server("--deaf")}, startup_deadline=600.0)
    daemon = Daemon(cfg)
    daemon.stop()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(daemon.run)
    assert not daemon.started.is_set()
    assert not os.path.exists(cfg.socket_path())


async def test_a_process_is_named_by_the_server_it_is_and_no_other(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"notes": server("--tools", "1")})
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon:
            (pid,) = daemon.supervisor.processes()
            assert daemon.server_of(pid) == "notes"
            assert daemon.server_of(os.getpid()) is None
            assert pid in daemon.server_pids()


async def test_the_endpoint_token_is_masked_in_what_servers_send_a_new_one_once_handed_out(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path, {"echo": server("--tools", "1")}, http_listen="127.0.0.1:0")
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            first = daemon.http_token()

            async def echoed(text: str) -> str:
                result = await agent.call("mcp__echo__tool0", {"text": text})
                said: str = result["content"][0]["text"]
                return said

            assert await echoed(f"I was sent {first}") == f"tool0:I was sent {TOKEN_MARK}"
            # The file written anew, as `mcpd token rotate` does.
            second = write_token(daemon.token.path, new_token())
            assert daemon.http_token() == second
            assert await echoed(f"now {second}") == f"tool0:now {TOKEN_MARK}"


def open_under(directory: str) -> list[str]:
    """What this process has open at or below ``directory``."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target == directory or target.startswith(directory + "/"):
            found.append(target)
    return found


async def test_what_the_servers_sandboxes_held_open_is_let_go_as_the_daemon_stops(
    tmp_path: Path,
) -> None:
    """A sandbox follows each hidden path (the state directory among them) by a
    descriptor held while mcpd runs; a daemon that stopped holds none of them."""
    cfg = make_config(tmp_path, {"notes": server("--tools", "2")})
    state = os.path.realpath(state_directory(cfg.daemon.state_dir))
    with trio.fail_after(LIMIT):
        async with running(cfg):
            assert state in open_under(state)
    assert open_under(state) == []
