"""A server whose config names a variable or secret file this machine lacks: the
daemon runs the others, and says everywhere why that one does not start."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.loading.load import load
from tests.support.clients.agent import Agent, connect, running
from tests.support.system.procs import scripted

UNSET = "NOT_SET_ANYWHERE"
SENTENCE = (
    f"servers.broken.env.TOKEN: environment variable {UNSET} is not set (use ${{{UNSET}:-default}})"
)


def server(*flags: str, env: str | None = None, enabled: bool = True) -> str:
    command, args = scripted(*flags)
    text = f"command = {json.dumps(command)}\nargs = {json.dumps(list(args))}\n"
    if env is not None:
        text += f"env = {{ TOKEN = {json.dumps(env)} }}\n"
    if not enabled:
        text += "enabled = false\n"
    return text


def write_config(path: Path, servers: dict[str, str]) -> None:
    text = f'[daemon]\nsocket = "{path.parent / "mcpd.sock"}"\nbackoff_base = 0.05\n'
    for alias, body in servers.items():
        text += f"\n[servers.{alias}]\n{body}"
    path.write_text(text)


async def status_of(agent: Agent, alias: str) -> dict[str, Any]:
    status = await agent.result("mcpd/status")
    return next(s for s in status["servers"] if s["alias"] == alias)


@pytest.fixture(autouse=True)
def _unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(UNSET, raising=False)


def test_check_config_accepts_a_disabled_server_whose_variables_are_unset(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.toml"
    write_config(
        path,
        {
            "time": server(),
            "off": server(env=f"${{{UNSET}}}", enabled=False) + 'cwd = "${file:absent}"\n',
        },
    )
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("mcpd")), "check-config", "--config", str(path)],
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", "")},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "2 server(s)" in proc.stdout


def test_a_cursor_file_with_an_unset_variable_loads_with_that_server_unable_to_start(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcp.json"
    env = {"API_KEY": f"${{env:{UNSET}}}"}
    servers = {"everything": {"command": "npx", "env": env}, "time": {"command": "uvx"}}
    path.write_text(json.dumps({"mcpServers": servers}))
    config = load(path, env={})
    assert config.servers["everything"].unresolved == (
        f"servers.everything.env.API_KEY: environment variable {UNSET} is not set "
        f"(use ${{{UNSET}:-default}})"
    )
    assert config.servers["time"].unresolved is None


async def test_a_disabled_server_with_unset_variables_does_not_stop_the_daemon(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.toml"
    write_config(path, {"time": server(), "off": server(env=f"${{{UNSET}}}", enabled=False)})
    with trio.fail_after(60):
        async with running(load(path), str(path)), connect(str(tmp_path / "mcpd.sock")) as agent:
            result = await agent.call("mcp__time__tool0", {"text": "now"})
            assert result["content"][0]["text"] == "tool0:now"
            status = await agent.result("mcpd/status")
            assert [s["alias"] for s in status["servers"]] == ["time"]


async def test_an_unset_variable_fails_only_its_server_and_says_why_everywhere(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "c.toml"
    write_config(path, {"time": server(), "broken": server(env=f"${{{UNSET}}}")})
    with trio.fail_after(60):
        async with (
            running(load(path), str(path)) as daemon,
            connect(str(tmp_path / "mcpd.sock")) as agent,
        ):
            result = await agent.call("mcp__time__tool0", {"text": "now"})
            assert result["content"][0]["text"] == "tool0:now"
            broken = await status_of(agent, "broken")
            assert broken["state"] == "unresolved"
            assert broken["last_error"] == SENTENCE
            assert broken["retry_at"] is None
            # It never listed tools: a call to one of its names says why, not "unknown tool".
            result = await agent.call("mcp__broken__tool0", {"text": "x"})
            assert result["isError"] is True
            assert SENTENCE in result["content"][0]["text"]
            assert daemon.supervisor.servers["broken"].attempts == 1
            assert "1 unresolved (broken)" in daemon.supervisor.summary()
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert any(SENTENCE in r.getMessage() for r in errors)


async def test_a_reload_that_breaks_a_server_keeps_its_tools_marked_and_a_fix_brings_it_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.toml"
    write_config(path, {"time": server(), "broken": server(env="literal")})
    with trio.fail_after(60):
        async with (
            running(load(path), str(path)) as daemon,
            connect(str(tmp_path / "mcpd.sock")) as agent,
        ):
            result = await agent.call("mcp__broken__tool0", {"text": "a"})
            assert result["content"][0]["text"] == "tool0:a"
            write_config(path, {"time": server(), "broken": server(env=f"${{{UNSET}}}")})
            report = await agent.result("mcpd/reload")
            assert report["changed"] == ["broken"]
            assert (await status_of(agent, "broken"))["last_error"] == SENTENCE
            tool = next(t for t in await agent.tools() if t["name"] == "mcp__broken__tool0")
            assert tool["_meta"]["mcpd/available"] is False
            assert SENTENCE in tool["description"]
            result = await agent.call("mcp__broken__tool0", {"text": "b"})
            assert result["isError"] is True
            text = result["content"][0]["text"]
            assert SENTENCE in text and "mcpd reload" in text
            assert result["_meta"]["mcpd/outage"]["state"] == "unresolved"
            result = await agent.call("mcp__time__tool0", {"text": "c"})
            assert result["content"][0]["text"] == "tool0:c"

            write_config(path, {"time": server(), "broken": server(env="literal")})
            report = await agent.result("mcpd/reload")
            assert report["changed"] == ["broken"]
            assert daemon.supervisor.servers["broken"].state == "ready"
            result = await agent.call("mcp__broken__tool0", {"text": "d"})
            assert result["content"][0]["text"] == "tool0:d"


async def test_a_reload_with_the_variable_replaced_by_a_literal_starts_the_server(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.toml"
    write_config(path, {"time": server(), "broken": server(env=f"${{{UNSET}}}")})
    with trio.fail_after(60):
        async with (
            running(load(path), str(path)) as daemon,
            connect(str(tmp_path / "mcpd.sock")) as agent,
        ):
            assert daemon.supervisor.servers["broken"].state == "unresolved"
            write_config(path, {"time": server(), "broken": server(env="literal")})
            await agent.result("mcpd/reload")
            broken = await status_of(agent, "broken")
            assert broken["state"] == "ready" and broken["last_error"] is None
            result = await agent.call("mcp__broken__tool0", {"text": "x"})
            assert result["content"][0]["text"] == "tool0:x"


async def test_an_unset_variable_in_daemon_still_rejects_a_reload_whole(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    write_config(path, {"time": server()})
    with trio.fail_after(60):
        async with (
            running(load(path), str(path)) as daemon,
            connect(str(tmp_path / "mcpd.sock")) as agent,
        ):
            path.write_text(path.read_text() + f'\n[naming]\ntemplate = "${{{UNSET}}}{{tool}}"\n')
            reply = await agent.rpc("mcpd/reload")
            assert reply["error"]["data"]["mcpd/configError"].startswith(
                f"{path}: naming.template: environment variable {UNSET} is not set"
            )
            assert daemon.supervisor.servers["time"].state == "ready"
