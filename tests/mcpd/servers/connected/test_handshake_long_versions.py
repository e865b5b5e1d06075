"""A ``server/discover`` result whose ``supportedVersions`` is longer than mcpd reads:
with era "modern" the outage says the list went unread for its size, not that the
server does not speak the version; with "auto" the journal says why the server is
greeted the legacy way."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
import trio

from mcpd.config.tables.model import Config
from protocol.mcp.greeting import VERSIONS_BYTES
from tests.support.clients.agent import connect, make_config, running

SERVER = str(Path(__file__).parents[3] / "support" / "servers" / "long_versions.py")
COUNT = 400
SIZE = len(json.dumps(["2026-07-28"] + ["1999-01-01"] * COUNT))
UNREAD = (
    f"lv: server/discover: its supportedVersions is {SIZE:,} bytes long, more than the "
    f"{VERSIONS_BYTES:,} mcpd reads: which versions it speaks is not known"
)


def config(tmp_path: Path, era: str) -> Config:
    servers = {"lv": {"command": sys.executable, "args": [SERVER, str(COUNT)], "era": era}}
    return make_config(tmp_path, servers)


async def test_a_modern_servers_versions_too_long_to_read_are_said_to_be_so(
    tmp_path: Path,
) -> None:
    assert SIZE > VERSIONS_BYTES
    with trio.fail_after(60):
        async with (
            running(config(tmp_path, "modern")) as daemon,
            connect(daemon.socket_path) as agent,
        ):
            await agent.initialize()
            status = await agent.result("mcpd/status")
    (row,) = status["servers"]
    assert row["state"] != "ready"
    assert row["last_error"] == UNREAD
    assert "does not speak" not in row["last_error"]


async def test_a_server_whose_versions_are_too_long_to_read_is_said_to_be_greeted_the_legacy_way(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with trio.fail_after(60), caplog.at_level(logging.INFO, logger="mcpd"):
        async with (
            running(config(tmp_path, "auto")) as daemon,
            connect(daemon.socket_path) as agent,
        ):
            await agent.initialize()
            status = await agent.result("mcpd/status")
    (row,) = status["servers"]
    assert (row["state"], row["era"]) == ("ready", "legacy")
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"{UNREAD}; trying the legacy handshake" in said
