"""What the daemon answers its own methods with, as the line it writes: ``mcpd/reload``,
``mcpd/reset`` and the servers' states a tool listing carries keep their keys, their
order and their absences, whatever type holds them on the way out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from mcpd.config.loading.load import load
from tests.support.clients.agent import connect, running
from tests.support.daemons.reloading import toml_server, write_config
from tests.support.system.procs import read_pid

MISSING = 'command = "/nonexistent/mcpd-test-server"\n'


def result_of(line: bytes) -> bytes:
    """The result of a reply as written, its keys in the daemon's order."""
    head, result = line.rstrip(b"\n").split(b'"result":', 1)
    assert head.startswith(b'{"jsonrpc":"2.0","id":'), line
    return result.removesuffix(b"}")


def keys_of(text: bytes) -> list[Any]:
    return json.loads(text, object_pairs_hook=lambda pairs: [k for k, _ in pairs])


async def test_a_reload_is_answered_its_report_key_by_key(tmp_path: Path) -> None:
    pid = {name: tmp_path / f"{name}.pid" for name in ("keep", "change", "remove", "add")}
    config_path, sock = tmp_path / "mcpd.toml", tmp_path / "mcpd.sock"
    servers = {n: toml_server(pid[n]) for n in ("keep", "change", "remove")}
    write_config(config_path, sock, servers)
    with trio.fail_after(60):
        async with running(load(config_path), str(config_path)), connect(str(sock)) as agent:
            for name in ("keep", "change", "remove"):
                await read_pid(pid[name])
            servers = {
                "keep": servers["keep"],
                "change": toml_server(pid["change"], "--tools", "2"),
                "add": toml_server(pid["add"]),
            }
            write_config(config_path, sock, servers, extra="max_tools = 100\n")
            line = await agent.rpc_text("mcpd/reload")
    assert result_of(line) == (
        b'{"resultType":"complete","added":["add"],"removed":["remove"],"changed":["change"],"unchanged":["keep"],'
        b'"restart":[],"settings":["daemon.max_tools"],"new_connections":[],"why":{}}'
    )


async def test_a_reset_and_the_states_a_listing_carries_keep_their_keys(tmp_path: Path) -> None:
    config_path, sock = tmp_path / "mcpd.toml", tmp_path / "mcpd.sock"
    write_config(config_path, sock, {"up": toml_server(tmp_path / "up.pid"), "gone": MISSING})
    with trio.fail_after(60):
        async with running(load(config_path), str(config_path)), connect(str(sock)) as agent:
            await read_pid(tmp_path / "up.pid")
            up = await agent.rpc_text("mcpd/reset", {"server": "up"})
            gone = await agent.rpc_text("mcpd/reset", {"server": "gone"})
            listed = await agent.rpc_text("tools/list")
    assert result_of(up) == (
        b'{"resultType":"complete","server":"up","was":"ready","circuit":"closed","reset":false,"state":"ready",'
        b'"waiting":false,"next_try":null}'
    )
    reset = json.loads(result_of(gone))
    assert keys_of(result_of(gone)) == [*json.loads(result_of(up))]
    assert (reset["reset"], reset["waiting"], reset["state"]) == (False, True, "failed")
    assert isinstance(reset["next_try"], str)
    states = json.loads(listed)["result"]["_meta"]["mcpd/servers"]
    assert keys_of(json.dumps(states).encode()) == [
        ["server", "state", "available", "reason", "since", "retry_at"],
        ["server", "state", "available"],
    ]
    assert states[1] == {"server": "up", "state": "ready", "available": True}
    assert (states[0]["server"], states[0]["available"]) == ("gone", False)
