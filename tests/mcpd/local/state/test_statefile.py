"""Last known tools survive restarts: the state file, its place, its atomic writes, and a
daemon restarted while a server is down."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import NamingConfig
from mcpd.local.state.statefile import (
    FILE_NAME,
    StateKeeper,
    fingerprint,
    read_state,
    state_dir,
    write_atomically,
)
from mcpd.registry.tables.catalog import Catalog
from protocol.mcp import core as mcp
from tests.support.clients.agent import connect, make_config, running
from tests.support.system.procs import scripted

# -- where the file lives --


def test_the_state_directory_follows_config_then_systemd_then_xdg() -> None:
    plain = parse_config({})
    assert state_dir(parse_config({"daemon": {"state_dir": "/srv/mcpd"}}), {}) == "/srv/mcpd"
    env = {"STATE_DIRECTORY": "/var/lib/mcpd:/var/lib/other", "XDG_STATE_HOME": "/x"}
    assert state_dir(plain, env) == "/var/lib/mcpd"
    assert state_dir(plain, {"XDG_STATE_HOME": "/home/ada/.state"}) == "/home/ada/.state/mcpd"
    expected = "/var/lib/mcpd" if os.geteuid() == 0 else "/home/ada/.local/state/mcpd"
    assert state_dir(plain, {"HOME": "/home/ada"}) == expected


def test_writes_are_atomic_and_private(tmp_path: Path) -> None:
    path = tmp_path / "new" / FILE_NAME
    write_atomically(str(path), b'{"format": 1}')
    write_atomically(str(path), b'{"format": 1, "servers": {}}')
    assert path.read_bytes() == b'{"format": 1, "servers": {}}'
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert os.listdir(path.parent) == [FILE_NAME]  # no temporary file left


@pytest.mark.parametrize(
    "content", [b"{not json", b'{"format": 1, "servers": {"a": {"tools": 3}}}', b'{"format": 99}']
)
def test_an_unusable_state_file_is_ignored_with_a_warning(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / FILE_NAME
    path.write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="mcpd.state"):
        state = read_state(str(path))
    assert state.servers == {}
    assert "ignoring" in caplog.text


def test_the_fingerprint_is_the_servers_identity_not_its_tuning() -> None:
    a = parse_config({"servers": {"s": {"command": "x", "args": ["1"]}}}).servers["s"]
    tuned = parse_config(
        {"servers": {"s": {"command": "x", "args": ["1"], "call_timeout": 5, "trusted": True}}}
    ).servers["s"]
    other = parse_config({"servers": {"s": {"command": "x", "args": ["2"]}}}).servers["s"]
    assert fingerprint(a) == fingerprint(tuned) != fingerprint(other)


async def test_the_first_write_waits_until_every_server_had_its_first_attempt(
    tmp_path: Path,
) -> None:
    # At start-up each server's listing would otherwise write the whole file again, in
    # the event loop, while the last servers are still answering.
    config = parse_config({"servers": {"a": {"command": "x"}}})
    registry = Catalog(NamingConfig())
    registry.update("a", [mcp.Tool(name="search")])
    path = tmp_path / FILE_NAME
    keeper = StateKeeper(str(path), registry, lambda: config, lambda alias: None)
    started = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(keeper.run, started)
        keeper.changed()
        await trio.sleep(1.5)  # three times the debounce after a change
        assert not path.exists()
        started.set()
        with trio.fail_after(10):
            while not path.exists():
                await trio.sleep(0.1)
        assert [t.name for t in read_state(str(path)).servers["a"].tools] == ["search"]
        nursery.cancel_scope.cancel()


# -- across a daemon restart --


def switchable(tmp_path: Path) -> dict[str, Any]:
    """A server that runs until ``tmp_path/down`` exists, with the same config either way."""
    command, args = scripted("--names", "search,fetch")
    script = 'test -e "$0" && { echo "switched off" >&2; exit 7; }; exec "$@"'
    return {"command": "/bin/sh", "args": ["-c", script, str(tmp_path / "down"), command, *args]}


async def saved(path: Path, alias: str) -> dict[str, Any]:
    with trio.fail_after(10):
        while True:
            try:
                data = json.loads(path.read_bytes())
            except (FileNotFoundError, ValueError):
                data = {}
            if alias in data.get("servers", {}):
                return data["servers"][alias]  # type: ignore[no-any-return]
            await trio.sleep(0.05)


async def test_a_server_down_after_a_restart_keeps_its_last_known_tools(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"web": switchable(tmp_path)}, state_dir=str(tmp_path / "state"))
    state_file = tmp_path / "state" / FILE_NAME
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            assert len(await agent.tools()) == 2
            entry = await saved(state_file, "web")
            assert [t["name"] for t in entry["tools"]] == ["search", "fetch"]
            assert entry["era"] == "modern" and entry["protocol_version"] == "2026-07-28"
            assert entry["fingerprint"] == fingerprint(cfg.servers["web"])
        (tmp_path / "down").touch()
        # A slow retry, so that the test ends while the runner waits, not mid-handshake.
        down_cfg = make_config(
            tmp_path,
            {"web": switchable(tmp_path)},
            state_dir=str(tmp_path / "state"),
            backoff_base=30,
            backoff_cap=60,
        )
        async with running(down_cfg) as daemon, connect(daemon.socket_path) as agent:
            listed = await agent.result("tools/list")
            names = sorted(t["name"] for t in listed["tools"])
            assert names == ["mcp__web__fetch", "mcp__web__search"]
            for t in listed["tools"]:
                assert t["_meta"]["mcpd/available"] is False
                assert t["description"].startswith("[unavailable: web ")
            (state,) = listed["_meta"]["mcpd/servers"]
            assert state["available"] is False and "exited with status 7" in state["reason"]
            status = await agent.result("mcpd/status")
            assert status["servers"][0]["tools"] == 2
            assert status["daemon"]["state_file"] == str(state_file)
            result = await agent.call("mcp__web__search", {"text": "x"})
            assert result["isError"] is True and "unavailable" in result["content"][0]["text"]
        # It stays saved while down, and comes back when the server does.
        assert [t["name"] for t in (await saved(state_file, "web"))["tools"]] == ["search", "fetch"]
        (tmp_path / "down").unlink()
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            assert all(t["_meta"]["mcpd/available"] for t in await agent.tools())


async def test_saved_tools_of_a_different_server_are_not_used(tmp_path: Path) -> None:
    servers = {"web": switchable(tmp_path)}
    cfg = make_config(tmp_path, servers, state_dir=str(tmp_path / "state"))
    with trio.fail_after(60):
        async with running(cfg):
            await saved(tmp_path / "state" / FILE_NAME, "web")
        (tmp_path / "down").touch()
        servers["web"]["args"].append("--tools")  # another command line: another server
        servers["web"]["args"].append("1")
        cfg = make_config(
            tmp_path, servers, state_dir=str(tmp_path / "state"), backoff_base=30, backoff_cap=60
        )
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            assert await agent.tools() == []


async def test_a_corrupt_state_file_does_not_stop_the_daemon(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / FILE_NAME).write_text("{ half written")
    cfg = make_config(tmp_path, {"web": switchable(tmp_path)}, state_dir=str(tmp_path / "state"))
    with trio.fail_after(60), caplog.at_level(logging.WARNING, logger="mcpd.state"):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            assert len(await agent.tools()) == 2
            # ...and it is rewritten with good content.
            assert len((await saved(tmp_path / "state" / FILE_NAME, "web"))["tools"]) == 2
    assert "not a valid state file" in caplog.text
