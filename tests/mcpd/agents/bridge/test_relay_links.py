"""`mcpd bridge` between a host and a daemon that comes and goes: lines over the limit,
a session set up again, ids of its own, a host that stops reading or leaves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from mcpd.agents.bridge import relay as bridge_module
from mcpd.agents.bridge.relay import Bridge
from tests.support.clients.agent import META, make_config, running
from tests.support.clients.bridge import BridgeProcess
from tests.support.system.procs import scripted

BRIDGE = [sys.executable, "-m", "mcpd", "bridge"]
LEGACY_INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "host", "version": "1"},
}


def server(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


def lines_of(*messages: Any) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def call(rid: Any, text: str = "x") -> dict[str, Any]:
    params = {"name": "mcp__s__tool0", "arguments": {"text": text}, "_meta": META}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


async def test_a_request_over_the_line_limit_is_answered_and_the_rest_go_on(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path, {"s": server()})
    big = call(7, "x" * (17 * 1024 * 1024))
    with trio.fail_after(60):
        async with running(cfg):
            done = await trio.run_process(
                [*BRIDGE, "--socket", cfg.socket_path()],
                stdin=lines_of(big, call(8, "small")),
                capture_stdout=True,
                capture_stderr=True,
            )
    by_id = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert sorted(by_id) == [7, 8]
    said = by_id[7]["error"]["message"]
    assert "over the 16777216 byte limit" in said and "it was not sent" in said
    assert by_id[8]["result"]["content"][0]["text"] == "tool0:small"
    assert b"over the 16777216 byte limit" in done.stderr


async def test_a_reply_past_the_default_line_limit_reaches_the_host(tmp_path: Path) -> None:
    size = 20 * 1000 * 1000
    cfg = make_config(
        tmp_path,
        {"s": server("--big", str(size))},
        max_line_bytes=64 << 20,
        result_budget_chars=32 << 20,
    )
    with trio.fail_after(120):
        async with running(cfg):
            # stdin stays open until the answer is in: a leaving host waits only so long.
            proc = await trio.lowlevel.open_process(
                [*BRIDGE, "--socket", cfg.socket_path()],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            bridge = BridgeProcess(proc)
            await bridge.send(call(1))
            reply = await bridge.receive()
            assert proc.stdin is not None
            await proc.stdin.aclose()
            assert await proc.wait() == 0
    assert len(reply["result"]["content"][0]["text"]) >= size


async def test_after_the_daemon_comes_back_the_host_hears_its_lists_may_have_changed(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path, {"s": server()})
    with trio.fail_after(90):
        proc = await trio.lowlevel.open_process(
            [*BRIDGE, "--socket", cfg.socket_path()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        bridge = BridgeProcess(proc)
        async with running(cfg):
            assert "result" in await bridge.ask(1, "initialize", LEGACY_INIT)
            await bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert "result" in await bridge.ask(2, "logging/setLevel", {"level": "debug"})
        async with running(cfg):
            await bridge.send(
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call(3)["params"]}
            )
            seen = [await bridge.receive()]
            while seen[-1].get("id") != 3:
                seen.append(await bridge.receive())
        told = [m["method"] for m in seen if "method" in m]
        assert "notifications/tools/list_changed" in told
        assert seen[-1]["result"]["content"][0]["text"] == "tool0:x"
        assert proc.stdin is not None and proc.stderr is not None
        await proc.stdin.aclose()
        assert await proc.wait() == 0
        stderr = await proc.stderr.receive_some(65536)
    assert b"connected to mcpd again" in stderr


async def test_a_host_id_like_the_bridges_own_is_answered(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"s": server()})
    init = {"jsonrpc": "2.0", "id": "mcpd-bridge-replay", "method": "initialize"}
    with trio.fail_after(60):
        async with running(cfg):
            done = await trio.run_process(
                [*BRIDGE, "--socket", cfg.socket_path()],
                stdin=lines_of({**init, "params": LEGACY_INIT}),
                capture_stdout=True,
            )
    (reply,) = map(json.loads, done.stdout.splitlines())
    assert reply["id"] == "mcpd-bridge-replay" and "result" in reply


async def test_a_socket_path_that_is_a_regular_file_is_said_to_be_one(tmp_path: Path) -> None:
    path = tmp_path / "not.sock"
    path.write_text("")
    with trio.fail_after(30):
        done = await trio.run_process(
            [*BRIDGE, "--socket", str(path)],
            stdin=lines_of({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            capture_stdout=True,
            capture_stderr=True,
        )
    (reply,) = map(json.loads, done.stdout.splitlines())
    said = f"{path} is a regular file, not a socket"
    assert said in reply["error"]["message"]
    assert said in done.stderr.decode()


async def test_a_host_that_closed_stdout_ends_the_bridge_cleanly(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"s": server()})
    with trio.fail_after(60):
        async with running(cfg):
            proc = await trio.lowlevel.open_process(
                [*BRIDGE, "--socket", cfg.socket_path()],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            assert proc.stdin is not None and proc.stdout is not None
            assert proc.stderr is not None
            await proc.stdout.aclose()
            await proc.stdin.send_all(lines_of(call(1)))
            await proc.stdin.aclose()
            assert await proc.wait() == 0
            stderr = await proc.stderr.receive_some(65536)
    assert stderr == b"mcpd bridge: the host closed the bridge's stdout; stopping\n"


async def test_an_open_listen_does_not_hold_a_leaving_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Were the open listen waited for, the bridge would wait out its whole grace.
    monkeypatch.setattr(bridge_module, "_EXIT_GRACE", 3600.0)
    cfg = make_config(tmp_path, {"s": server()})
    host_out, bridge_in = trio.testing.memory_stream_pair()
    bridge_out, host_in = trio.testing.memory_stream_pair()
    listen = {
        "jsonrpc": "2.0",
        "id": "L1",
        "method": "subscriptions/listen",
        "params": {"_meta": META, "notifications": {"toolsListChanged": True}},
    }
    with trio.fail_after(60):
        async with running(cfg):
            bridge = Bridge(cfg.socket_path(), bridge_in, bridge_out)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(bridge.run)
                await host_out.send_all(lines_of(listen))
                await host_out.aclose()
    del host_in
