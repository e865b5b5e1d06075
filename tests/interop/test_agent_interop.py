"""Progress, cancellation and tool-list changes with real clients and servers."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import pytest
import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.hosts.peers import ROOT, console_script, node_env, node_tool, sdk_server_cmd
from tests.support.hosts.third_party import HERE, lines, tapped

CUSTOM = str(ROOT / "tests" / "support" / "servers" / "demo_custom.py")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sdk_client_through_the_bridge_gets_progress_and_cancels(
    tmp_path: Path, mode: str
) -> None:
    command, args = sdk_server_cmd()
    cfg = make_config(
        tmp_path,
        {
            "sdk": {"command": command, "args": args},
            "custom": {"command": sys.executable, "args": [CUSTOM]},
        },
    )
    with trio.fail_after(120):
        async with running(cfg) as daemon:
            out = await trio.run_process(
                [
                    sys.executable,
                    str(HERE / "sdk_client_session.py"),
                    mode,
                    "--",
                    console_script("mcpd"),
                    "bridge",
                    "--socket",
                    daemon.socket_path,
                ],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            assert out.returncode == 0, out.stderr.decode()[-3000:]
            seen = json.loads(out.stdout.decode().strip().splitlines()[-1])
    assert seen["version"] == ("2026-07-28" if mode == "auto" else "2025-11-25")
    assert "mcp__sdk__count_up" in seen["tools"] and "mcp__custom__sleep" in seen["tools"]
    assert seen["counted"] == "counted 4"
    assert seen["progress"] == [1, 2, 3, 4]
    assert seen["sleep_cancelled"] is True
    assert len(seen["cancelled_upstream"]) == 1  # the server saw the cancellation


async def test_everything_server_progress_and_cancel_behind_mcpd(tmp_path: Path) -> None:
    log = tmp_path / "everything.in"
    cfg = make_config(
        tmp_path,
        {"everything": tapped(log, node_tool("mcp-server-everything"), ["stdio"], env=node_env())},
    )
    with trio.fail_after(120):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            result = await agent.result(
                "tools/call",
                {
                    "name": "mcp__everything__trigger-long-running-operation",
                    "arguments": {"duration": 1, "steps": 4},
                    "_meta": {"progressToken": "p-1"},
                },
            )
            assert result.get("isError") is not True
            progress = [
                n["params"] for n in agent.notifications if n["method"] == "notifications/progress"
            ]
            assert [p["progress"] for p in progress] == [1, 2, 3, 4]
            assert {p["progressToken"] for p in progress} == {"p-1"}

            await agent.send_raw(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": "long",
                        "method": "tools/call",
                        "params": {
                            "name": "mcp__everything__trigger-long-running-operation",
                            "arguments": {"duration": 30, "steps": 30},
                            "_meta": {
                                "progressToken": "p-2",
                                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                "io.modelcontextprotocol/clientCapabilities": {},
                            },
                        },
                    }
                ).encode()
                + b"\n"
            )
            before = len(agent.notifications)
            await agent.wait_notifications(before + 1)  # it started
            await agent.send_raw(
                b'{"jsonrpc":"2.0","method":"notifications/cancelled",'
                b'"params":{"requestId":"long"}}\n'
            )
            echo = await agent.call("mcp__everything__echo", {"message": "still here"})
            assert echo["content"][0]["text"] == "Echo: still here"
    sent = lines(log)
    cancels = [m for m in sent if m.get("method") == "notifications/cancelled"]
    assert len(cancels) == 1
    long_call = next(
        m
        for m in sent
        if m.get("method") == "tools/call" and m["params"]["arguments"].get("duration") == 30
    )
    assert cancels[0]["params"]["requestId"] == long_call["id"]
    # mcpd's own token went upstream, not the agent's.
    assert long_call["params"]["_meta"]["progressToken"] != "p-2"
    assert agent.unmatched == []


async def test_everything_servers_early_list_changed_is_acted_on(tmp_path: Path) -> None:
    log = tmp_path / "everything.in"
    cfg = make_config(
        tmp_path,
        {"everything": tapped(log, node_tool("mcp-server-everything"), ["stdio"], env=node_env())},
    )
    with trio.fail_after(60):
        async with running(cfg):
            # The unsolicited notification makes mcpd list the tools again.
            while sum(1 for m in lines(log) if m.get("method") == "tools/list") < 2:
                await trio.sleep(0.05)


async def test_a_modern_servers_new_tool_reaches_a_subscribed_agent(tmp_path: Path) -> None:
    command, args = sdk_server_cmd()
    cfg = make_config(tmp_path, {"sdk": {"command": command, "args": [*args, "--grow"]}})
    with trio.fail_after(60):
        async with (
            running(cfg) as daemon,
            connect(daemon.socket_path) as agent,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(
                functools.partial(
                    agent.rpc,
                    "subscriptions/listen",
                    {"notifications": {"toolsListChanged": True}},
                    rid="L",
                )
            )
            await agent.wait_notifications(1)  # acknowledged
            runner = daemon.supervisor.servers["sdk"]
            with trio.fail_after(10):  # mcpd's own subscription to the server
                while not runner.tool_list.subscribed:
                    await trio.sleep(0.02)
            await agent.call("mcp__sdk__grow", {"name": "sprout"})
            changed = (await agent.wait_notifications(2))[1]
            assert changed["method"] == "notifications/tools/list_changed"
            assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L"
            names = [t["name"] for t in await agent.tools()]
            assert "mcp__sdk__sprout" in names
            result = await agent.call("mcp__sdk__sprout")
            assert result["content"][0]["text"] == "sprout"
            nursery.cancel_scope.cancel()
