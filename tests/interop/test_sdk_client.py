"""The official SDK client, through `mcpd bridge`, using tools of real servers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio

from tests.support.clients.agent import make_config, running
from tests.support.hosts.peers import console_script, node_env, node_tool, sdk_server_cmd
from tests.support.system.procs import scripted

PROBE = str(Path(__file__).with_name("sdk_client_probe.py"))


async def probe(socket: str, mode: str, tool: str, args: dict[str, object]) -> dict[str, object]:
    bridge = console_script("mcpd")
    result = await trio.run_process(
        [
            sys.executable,
            PROBE,
            mode,
            tool,
            json.dumps(args),
            "--",
            bridge,
            "bridge",
            "--socket",
            socket,
        ],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    return json.loads(result.stdout.decode().strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sdk_client_lists_and_calls_aggregated_tools(tmp_path: Path, mode: str) -> None:
    command, args = sdk_server_cmd()
    cfg = make_config(
        tmp_path,
        {
            "sdk": {"command": command, "args": args},
            "everything": {
                "command": node_tool("mcp-server-everything"),
                "args": ["stdio"],
                "env": node_env(),
            },
        },
    )
    with trio.fail_after(120):
        async with running(cfg) as daemon:
            seen = await probe(daemon.socket_path, mode, "mcp__sdk__shout", {"text": "via mcpd"})
            assert seen["protocol_version"] == ("2026-07-28" if mode == "auto" else "2025-11-25")
            tools = set(seen["tools"])  # type: ignore[arg-type]
            assert {
                "mcp__sdk__shout",
                "mcp__sdk__boom",
                "mcp__everything__echo",
                "mcp__everything__get-sum",
            } <= tools
            assert seen["text"] == ["VIA MCPD"] and seen["is_error"] is False
            seen = await probe(
                daemon.socket_path, mode, "mcp__everything__echo", {"message": "hello"}
            )
            assert seen["text"] == ["Echo: hello"]
            seen = await probe(daemon.socket_path, mode, "mcp__sdk__boom", {})
            assert seen["is_error"] is True


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sdk_client_reads_a_listing_of_thousands_written_in_pieces(
    tmp_path: Path, mode: str
) -> None:
    command, args = scripted("--tools", "2000")
    cfg = make_config(tmp_path, {"many": {"command": command, "args": list(args)}})
    with trio.fail_after(120):
        async with running(cfg) as daemon:
            seen = await probe(daemon.socket_path, mode, "mcp__many__tool1999", {"text": "x"})
    assert sorted(seen["tools"]) == sorted(f"mcp__many__tool{i}" for i in range(2000))  # type: ignore[arg-type]
    assert seen["text"] == ["tool1999:x"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_one_servers_malformed_tools_do_not_break_the_sdks_list(
    tmp_path: Path, mode: str
) -> None:
    # The official SDK validates the whole tools/list: one tool whose inputSchema is
    # not an object, or whose icons are not an array, failed every call of the host.
    from tests.support.parts.upstream import BAD_SHAPES

    sdk_command, sdk_args = sdk_server_cmd()
    command, args = scripted("--extra-tools", json.dumps(BAD_SHAPES))
    cfg = make_config(
        tmp_path,
        {
            "sdk": {"command": sdk_command, "args": sdk_args},
            "sloppy": {"command": command, "args": args},
        },
    )
    with trio.fail_after(120):
        async with running(cfg) as daemon:
            seen = await probe(daemon.socket_path, mode, "mcp__sdk__shout", {"text": "still"})
    assert seen["is_error"] is False and seen["text"] == ["STILL"]
    listed = set(seen["tools"])  # type: ignore[arg-type]
    assert {"mcp__sloppy__untyped", "mcp__sloppy__odd_fields", "mcp__sdk__shout"} <= listed
    assert "mcp__sloppy__array_schema" not in listed
