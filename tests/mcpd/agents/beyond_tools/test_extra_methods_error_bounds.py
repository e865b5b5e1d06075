"""A server's error to a prompts/get, a resources/read or a completion/complete is held
to the bounds a tool call's error is (``calls.result_bounds.error_within``), through a
running daemon, in either era of the server and of the agent: its message cut to the
text budget with a note of how much, its data past its bound left out with a note of
its size. After a reload, the budget the reload set holds. An ask to open links is
read before its error is bounded: its links are not lost with its data."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.agents.askback import url_required
from mcpd.agents.calls.result_bounds import DATA_BYTES
from mcpd.config.loading.load import load
from tests.support.clients.agent import META, Agent, connect, make_config, running
from tests.support.daemons.reloading import write_config
from tests.support.hostile.oversized_server import DATA_CHARS, LINKS, MESSAGE_CHARS, SHOUT_URI

SERVER = str(Path(__file__).resolve().parents[3] / "support" / "hostile" / "oversized_server.py")
BUDGET = 500
CUT = "more characters were cut here"
# (server's era, agent's era)
WAYS = [("legacy", "legacy"), ("legacy", "modern"), ("modern", "legacy"), ("modern", "modern")]


async def _errors(tmp_path: Path, server: str, era: str) -> dict[str, dict[str, Any]]:
    """What ``_asked`` comes to, the server speaking ``server``'s era, the agent
    ``era``'s."""
    modern = era == "modern"
    big = {"command": sys.executable, "args": [SERVER, server]}
    cfg = make_config(tmp_path, {"big": big}, result_budget_chars=BUDGET)
    with trio.fail_after(60):
        async with (
            running(cfg) as daemon,
            connect(daemon.socket_path, modern) as agent,
        ):
            if not modern:
                await agent.initialize()
            return await _asked(agent)


async def _asked(agent: Agent) -> dict[str, dict[str, Any]]:
    """The error each of a prompts/get, a resources/read and a completion/complete of
    the server's ``shout`` comes to, by method."""
    name = (await agent.result("prompts/list"))["prompts"][1]["name"]
    assert name.endswith("shout"), name
    asked: dict[str, dict[str, Any]] = {
        "prompts/get": {"name": name},
        "resources/read": {"uri": SHOUT_URI},
        "completion/complete": {
            "ref": {"type": "ref/prompt", "name": name},
            "argument": {"name": "a", "value": "x"},
        },
    }
    return {method: (await agent.rpc(method, params))["error"] for method, params in asked.items()}


def _check(errors: dict[str, dict[str, Any]], budget: int) -> None:
    """Each error's message is cut to ``budget``, its server's mark counted, with the
    note of how much; its data is mcpd's note of its size."""
    for method, error in errors.items():
        message, data = error["message"], error["data"]
        shouted = message.count("M")
        assert shouted == budget - len(message.split("M", 1)[0]), (method, len(message))
        assert f"{MESSAGE_CHARS - shouted} {CUT}" in message, (method, message[-200:])
        assert len(message) < budget + 200, (method, len(message))
        assert isinstance(data, str) and "was left out" in data, (method, str(data)[:80])
        assert f"{DATA_CHARS + len(json.dumps({'d': ''}))} bytes" in data, (method, data)
        assert f"at most {DATA_BYTES} bytes" in data, (method, data)


@pytest.mark.parametrize("way", WAYS, ids=[f"{s}-server-{a}-agent" for s, a in WAYS])
async def test_a_servers_error_beyond_tools_is_cut_to_the_budget_and_its_data_left_out(
    tmp_path: Path, way: tuple[str, str]
) -> None:
    _check(await _errors(tmp_path, *way), BUDGET)


async def test_after_a_reload_the_budget_it_set_holds_for_a_servers_error(tmp_path: Path) -> None:
    path, sock = tmp_path / "mcpd.toml", tmp_path / "mcpd.sock"
    big = {
        "big": f"command = {json.dumps(sys.executable)}\nargs = {json.dumps([SERVER, 'modern'])}\n"
    }
    write_config(path, sock, big, f"result_budget_chars = {BUDGET}\n")
    with trio.fail_after(60):
        async with running(load(path), str(path)) as daemon, connect(daemon.socket_path) as agent:
            _check(await _asked(agent), BUDGET)
            write_config(path, sock, big, "result_budget_chars = 300\n")
            await daemon.reload()
            _check(await _asked(agent), 300)


async def test_an_ask_to_open_more_links_than_fit_in_an_errors_data_is_still_offered(
    tmp_path: Path,
) -> None:
    big = {"command": sys.executable, "args": [SERVER, "legacy"]}
    cfg = make_config(tmp_path, {"big": big}, result_budget_chars=BUDGET)
    caps: dict[str, Any] = {
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"url": {}}}
    }
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            name = (await agent.result("prompts/list"))["prompts"][0]["name"]
            assert name.endswith("links"), name
            params = {"name": name, "_meta": {**META, **caps}}
            result = (await agent.rpc("prompts/get", params))["result"]
    assert result["resultType"] == "input_required", result
    urls = [r["params"]["url"] for r in result["inputRequests"].values()]
    assert len(urls) == url_required.MAX_LINKS < LINKS, len(urls)
    assert urls[0].startswith("https://example.com/0?state=sss"), urls[0][:40]
