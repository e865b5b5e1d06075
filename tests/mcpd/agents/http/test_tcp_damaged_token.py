"""A token file that does not hold a token: ``mcpd serve`` stops (exit 78) with one
line naming the file and the command that repairs it; damaged while the daemon runs,
each request is refused with a body that says why, the journal says so once, and again
once the file holds a token."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import pytest
import trio

from mcpd.local.state.endpoint_token import write_token
from tests.support.clients.agent import make_config, running
from tests.support.clients.daemon_http import auth, http
from tests.support.daemons.as_operator import MCPD

DAMAGE = b"\x84\xb0" + os.urandom(62)  # not ASCII from its first byte


def damage(path: Path) -> None:
    aside = path.with_name("damaged")
    aside.write_bytes(DAMAGE)
    aside.chmod(0o600)
    aside.replace(path)


def test_serve_on_a_damaged_token_stops_with_one_line_naming_the_file(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    damage(state / "token")
    config = tmp_path / "mcpd.toml"
    config.write_text(f'[daemon]\nstate_dir = "{state}"\nhttp_listen = "127.0.0.1:0"\n')
    proc = subprocess.run(
        [
            *MCPD,
            "serve",
            "--config",
            str(config),
            "--socket",
            str(tmp_path / "s.sock"),
            "--log",
            "stderr",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 78, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, proc.stderr
    assert f"cannot read the token in {state / 'token'}" in errors[0]
    assert "`mcpd token --rotate` writes a new one" in errors[0]
    assert "Traceback" not in proc.stderr
    assert (state / "token").read_bytes() == DAMAGE  # left for the operator to look at


async def test_a_token_damaged_while_running_is_said_once_and_refused_with_a_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = make_config(tmp_path, {}, http_listen="127.0.0.1:0", state_dir=str(tmp_path / "state"))
    with trio.fail_after(60):
        async with running(config) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            assert (await http(port, "GET", "/healthz", auth(token))).status == 200
            damage(tmp_path / "state" / "token")
            for _ in range(3):
                refused = await http(port, "GET", "/healthz", auth(token))
                assert refused.status == 503
                message = refused.json()["error"]["message"]
                assert "cannot read the token" in message and "mcpd token --rotate" in message
            said = [r for r in caplog.records if r.levelno == logging.ERROR]
            assert len(said) == 1 and "mcpd token --rotate" in said[0].getMessage()
            fresh = write_token(str(tmp_path / "state" / "token"))
            assert (await http(port, "GET", "/healthz", auth(fresh))).status == 200
            assert "the token file can be read again" in caplog.text
