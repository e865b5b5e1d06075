"""A server's own settings (``tools``, ``tool_timeouts``, ``prompts``) naming what the server
does not list: no config error (it may list them later), but said beside the server in
``mcpd status`` and, once for each list that leaves them unmatched, in the journal."""

from __future__ import annotations

import html
import logging
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.loading.load import load
from tests.support.clients.agent import Agent, connect, running
from tests.support.clients.daemon_http import socket_get
from tests.support.daemons.reloading import toml_server, wait_for, write_config
from tests.support.parts.status_rows import status_text
from tests.support.system.procs import read_pid

SETTINGS = """tool_timeouts = { tool1 = 5.0, nosuch = 5.0 }
[servers.notes.tools]
allow = ["serach", "tool*"]
rename = { tool0 = "first", nosuch2 = "x" }
description = { gone = "what it does" }
[servers.notes.prompts]
allow = ["prompt0", "greet"]
"""


async def _row(agent: Agent, alias: str) -> dict[str, Any]:
    status = await agent.result("mcpd/status")
    row: dict[str, Any] = next(s for s in status["servers"] if s["alias"] == alias)
    return row


async def test_names_a_server_does_not_list_are_said_in_status_and_once_in_the_journal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config_path = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    pid = tmp_path / "notes.pid"
    notes = toml_server(pid, "--prompts", "1") + SETTINGS
    write_config(config_path, sock, {"notes": notes, "other": toml_server(tmp_path / "o.pid")})
    caplog.set_level(logging.WARNING, "mcpd")
    with trio.fail_after(60):
        async with (
            running(load(config_path), str(config_path)) as daemon,
            connect(str(sock)) as agent,
        ):
            await read_pid(pid)
            await wait_for(lambda: daemon.catalog.prompts.count("notes") == 1)
            expected = [
                "tools.allow names serach, which notes does not list",
                "tools.rename names nosuch2, which notes does not list",
                "tools.description names gone, which notes does not list",
                "tool_timeouts names nosuch, which notes does not list",
                "prompts.allow names greet, which notes does not list as a prompt",
            ]
            await wait_for(lambda: len(daemon.report.unlisted.of("notes")) == len(expected))
            row = await _row(agent, "notes")
            assert row["warnings"] == expected
            assert (await _row(agent, "other"))["warnings"] == []
            status = await agent.result("mcpd/status")
            text = status_text(status)
            assert "warning| tools.allow names serach, which notes does not list" in text
            page = html.unescape((await socket_get(str(sock), "/")).decode())
            assert "tools.allow names serach, which notes does not list" in page
            # Asked again by more agents, and the server's state changing, the journal
            # says each once.
            async with connect(str(sock)) as second:
                await second.result("mcpd/status")
            daemon._changed("notes")
            logged = [r.getMessage() for r in caplog.records if "does not list" in r.getMessage()]
            assert sorted(logged) == sorted(f"notes: {said}" for said in expected)


async def test_an_allow_that_matches_nothing_hides_every_tool_and_status_says_why(
    tmp_path: Path,
) -> None:
    config_path = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    pid = tmp_path / "notes.pid"
    notes = toml_server(pid) + '[servers.notes.tools]\nallow = ["serach"]\n'
    write_config(config_path, sock, {"notes": notes})
    with trio.fail_after(60):
        async with running(load(config_path), str(config_path)), connect(str(sock)) as agent:
            await read_pid(pid)
            row = await _row(agent, "notes")
            while row["state"] != "ready":
                await trio.sleep(0.02)
                row = await _row(agent, "notes")
            assert row["tools"] == 0
            assert row["warnings"] == ["tools.allow names serach, which notes does not list"]
