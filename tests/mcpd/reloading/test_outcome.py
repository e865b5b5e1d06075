"""A reload refused shows in ``mcpd status`` (text and JSON) and on the status page, saying
when and why, until a reload is taken: what runs is then not what the file holds."""

from __future__ import annotations

import html
import os
import signal
from datetime import datetime
from pathlib import Path
from typing import Any

import trio

from mcpd.config.loading.load import load
from tests.support.clients.agent import Agent, connect, running
from tests.support.clients.daemon_http import socket_get
from tests.support.daemons.reloading import toml_server, write_config
from tests.support.parts.status_rows import status_text
from tests.support.system.procs import read_pid


async def _refused(agent: Agent) -> dict[str, Any] | None:
    status = await agent.result("mcpd/status")
    refused: dict[str, Any] | None = status["daemon"]["reload_refused"]
    return refused


async def test_a_reload_refused_by_sighup_shows_in_status_until_one_is_taken(
    tmp_path: Path,
) -> None:
    config_path = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    write_config(config_path, sock, {"notes": toml_server(tmp_path / "notes.pid")})
    good = config_path.read_text()
    with trio.fail_after(60):
        async with running(load(config_path), str(config_path)), connect(str(sock)) as agent:
            await read_pid(tmp_path / "notes.pid")
            assert await _refused(agent) is None
            config_path.write_text(good + "bogus = 1\n")
            os.kill(os.getpid(), signal.SIGHUP)
            refused: dict[str, Any] | None = None
            while refused is None:
                refused = await _refused(agent)
                await trio.sleep(0.02)
            assert refused["reason"].startswith(f"{config_path}: servers.notes.bogus: unknown key;")
            assert datetime.fromisoformat(refused["at"]) >= datetime.fromisoformat(
                refused["config_read"]
            )
            status = await agent.result("mcpd/status")
            warning = status["daemon"]["warnings"][0]
            assert warning.startswith("the reload at ")
            assert f"runs still: {config_path}: servers.notes.bogus: unknown key;" in warning
            assert f"warning: {warning}" in status_text(status)
            page = html.unescape((await socket_get(str(sock), "/")).decode())
            assert warning in page
            # So says `mcpd reload`'s own refusal, and a reload taken ends it.
            reply = await agent.rpc("mcpd/reload")
            assert "servers.notes.bogus" in reply["error"]["message"]
            assert await _refused(agent) is not None
            config_path.write_text(good)
            await agent.result("mcpd/reload")
            assert await _refused(agent) is None
            status = await agent.result("mcpd/status")
            assert not status["daemon"]["warnings"]


async def test_status_says_a_reload_refused_for_a_profile_socket_it_could_not_bind(
    tmp_path: Path,
) -> None:
    config_path = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    write_config(config_path, sock, {"notes": toml_server(tmp_path / "notes.pid")})
    taken = tmp_path / "taken.sock"
    with trio.socket.socket(trio.socket.AF_UNIX) as other, trio.fail_after(60):
        await other.bind(str(taken))
        other.listen()
        async with running(load(config_path), str(config_path)), connect(str(sock)) as agent:
            await read_pid(tmp_path / "notes.pid")
            profile = f'\n[profiles.p]\nservers = ["notes"]\nsocket = "{taken}"\n'
            config_path.write_text(config_path.read_text() + profile)
            reply = await agent.rpc("mcpd/reload")
            assert "profiles.p.socket" in reply["error"]["message"]
            refused = await _refused(agent)
            assert refused is not None and "profiles.p.socket" in refused["reason"]
