"""A reload refused for a config error keeps the config's secrets out of every place it
is said: ``mcpd reload``'s reply, the log, ``mcpd status`` (text and JSON)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import trio

from mcpd.config.loading.load import load
from tests.support.clients.agent import connect, running
from tests.support.daemons.reloading import write_config
from tests.support.parts.status_rows import status_text

SECRET = "hunter2hunter2zz"
BROKEN = [
    f'[servers.x]\ncommand = "node"\nenv = "API_KEY={SECRET}"\n',
    f'[servers.x]\nurl = "https://h.example/mcp"\nheaders = "X-Api-Key: {SECRET}"\n',
    f'[servers.x]\ncommand = "node"\nargs = "--password {SECRET}"\n',
    f'[servers.x]\nurl = "https://h/mcp"\nheaders = {{ "X-Api-Key" = "{SECRET}", O = True }}\n',
    f'[servers.x]\ncommand = "node"\nenv = {{ DB_PASS = "{SECRET}", DEBUG = yes }}\n',
    f'[servers.x]\ncommand = "node"\nargs = ["--password", "{SECRET}", True]\n',
    f'[servers.x]\ncommand = "node"\nargs = [\n  "--password",\n  "{SECRET}", True\n]\n',
    f'[servers.x]\ncommand = "node"\nenv.SOMETHING = {SECRET}\n',
]


async def test_a_refused_reload_says_no_secret_anywhere(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, "mcpd")
    config_path = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    write_config(config_path, sock, {})
    good = config_path.read_text()
    with trio.fail_after(60):
        async with running(load(config_path), str(config_path)), connect(str(sock)) as agent:
            for broken in [*BROKEN, '[servers.y]\ncommand = "x"\ncall_timeout = "30s"\n']:
                config_path.write_text(good + "\n" + broken)
                reply = await agent.rpc("mcpd/reload")
                assert reply["error"]["message"].startswith("config rejected"), reply
                status = await agent.result("mcpd/status")
                refused = status["daemon"]["reload_refused"]
                assert refused is not None
                said = [json.dumps(reply), json.dumps(status), status_text(status)]
                said.append(caplog.text)
                assert all(SECRET not in place for place in said), broken
                assert refused["reason"] in status_text(status)
            # A value whose key holds no secret is still written, so the slip shows.
            assert (
                'call_timeout: expected a number of seconds, got the string "30s"'
                in (refused["reason"])
            )
