"""The official SDK clients against profiles: Python (mcp 2.3.0) and TypeScript
(@modelcontextprotocol/sdk 1.32.2) over the HTTP endpoint with the bearer token, and
over `mcpd bridge --profile`, in search mode and with names of the profile's own."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import make_config, running
from tests.support.hosts.peers import console_script, node_env, node_tool, sdk_server_cmd
from tests.support.hosts.third_party import HERE, run_json, ts_probe
from tests.support.system.procs import scripted

META_TOOLS = ["mcpd_search_tools", "mcpd_describe_tools", "mcpd_call_tool"]


def config(tmp_path: Path) -> Any:
    command, args = sdk_server_cmd()
    return make_config(
        tmp_path,
        {
            "sdk": {"command": command, "args": args},
            "everything": {
                "command": node_tool("mcp-server-everything"),
                "args": ["stdio"],
                "env": node_env(),
            },
        },
        profiles={
            "coding": {"servers": ["sdk"], "discovery": "search", "pinned": ["count_up"]},
            "node": {
                "servers": ["everything"],
                "tools": {"allow": ["echo", "get-sum", "trigger-long-running-operation"]},
                "template": "{alias}__{tool}",
                "max_length": 53,
            },
        },
        http_listen="127.0.0.1:0",
        state_dir=str(tmp_path / "state"),
    )


def bridge(daemon: Any, profile: str) -> list[str]:
    return [console_script("mcpd"), "bridge", "--socket", daemon.socket_path, "--profile", profile]


def endpoint(daemon: Any, profile: str) -> tuple[str, str]:
    assert daemon.agent_server.endpoint is not None
    return f"{daemon.agent_server.endpoint.url}?profile={profile}", daemon.http_token()


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28", "auto"])
async def test_python_sdk_over_the_http_endpoint_with_the_token(tmp_path: Path, mode: str) -> None:
    probe = [sys.executable, str(HERE / "sdk_http_probe.py")]
    with trio.fail_after(120):
        async with running(config(tmp_path)) as daemon:
            url, token = endpoint(daemon, "coding")
            call = json.dumps({"name": "mcp__sdk__shout", "arguments": {"text": "via http"}})
            seen = await run_json([*probe, url, token, mode, "mcpd_call_tool", call])
            assert seen["protocol_version"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            assert seen["tools"] == [*META_TOOLS, "mcp__sdk__count_up"]
            assert seen["text"] == ["VIA HTTP"] and seen["is_error"] is False
            url, token = endpoint(daemon, "node")
            steps = json.dumps({"duration": 0.2, "steps": 2})
            seen = await run_json(
                [*probe, url, token, mode, "everything__trigger-long-running-operation", steps]
            )
            assert seen["tools"] == [
                "everything__echo",
                "everything__get-sum",
                "everything__trigger-long-running-operation",
            ]
            assert seen["progress"] == [1, 2] and seen["is_error"] is False
            refused = await trio.run_process(
                [*probe, url, "not-the-token", mode, "everything__echo", "{}"],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            assert refused.returncode != 0 and b"Unauthorized" in refused.stderr


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_python_sdk_over_the_bridge_with_a_profile(tmp_path: Path, mode: str) -> None:
    probe = [sys.executable, str(HERE / "sdk_client_probe.py")]
    with trio.fail_after(120):
        async with running(config(tmp_path)) as daemon:
            args = json.dumps({"message": "hello"})
            seen = await run_json(
                [*probe, mode, "everything__echo", args, "--", *bridge(daemon, "node")]
            )
            assert seen["protocol_version"] == ("2026-07-28" if mode == "auto" else "2025-11-25")
            assert "everything__echo" in seen["tools"] and len(seen["tools"]) == 3
            assert seen["text"] == ["Echo: hello"]
            call = json.dumps({"name": "mcp__sdk__shout", "arguments": {"text": "bridged"}})
            seen = await run_json(
                [*probe, mode, "mcpd_call_tool", call, "--", *bridge(daemon, "coding")]
            )
            assert seen["tools"] == [*META_TOOLS, "mcp__sdk__count_up"]
            assert seen["text"] == ["BRIDGED"]


async def test_typescript_sdk_over_the_http_endpoint_with_the_token(tmp_path: Path) -> None:
    with trio.fail_after(120):
        async with running(config(tmp_path)) as daemon:
            url, token = endpoint(daemon, "node")
            sum_args = json.dumps({"a": 2, "b": 3})
            seen = await run_json(ts_probe("http", url, token, "everything__get-sum", sum_args))
            assert seen["server"] == "mcpd" and seen["session"]  # a legacy session over TCP
            assert seen["protocol_version"] == "2025-11-25"
            assert seen["tools"] == [
                "everything__echo",
                "everything__get-sum",
                "everything__trigger-long-running-operation",
            ]
            assert "5" in seen["text"][0] and seen["is_error"] is False
            url, token = endpoint(daemon, "coding")
            call = json.dumps({"name": "mcp__sdk__count_up", "arguments": {"steps": 3}})
            seen = await run_json(ts_probe("http", url, token, "mcpd_call_tool", call))
            assert seen["tools"] == [*META_TOOLS, "mcp__sdk__count_up"]
            assert seen["progress"] == [1, 2, 3]


async def test_typescript_sdk_over_the_bridge_with_a_profile(tmp_path: Path) -> None:
    with trio.fail_after(120):
        async with running(config(tmp_path)) as daemon:
            search = json.dumps({"query": "shout text loudly"})
            seen = await run_json(
                ts_probe("stdio", "mcpd_search_tools", search, "--", *bridge(daemon, "coding"))
            )
            assert seen["tools"] == [*META_TOOLS, "mcp__sdk__count_up"]
            assert seen["text"][0].splitlines()[1].startswith("- mcp__sdk__shout: [sdk]")
            seen = await run_json(
                ts_probe(
                    "stdio", "everything__echo", '{"message": "ts"}', "--", *bridge(daemon, "node")
                )
            )
            assert seen["text"] == ["Echo: ts"] and len(seen["tools"]) == 3


async def test_typescript_sdk_reads_a_listing_of_thousands_written_in_pieces(
    tmp_path: Path,
) -> None:
    command, args = scripted("--tools", "2000")
    cfg = make_config(tmp_path, {"many": {"command": command, "args": list(args)}})
    with trio.fail_after(120):
        async with running(cfg) as daemon:
            call = ts_probe("stdio", "mcp__many__tool1999", '{"text": "ts"}', "--")
            seen = await run_json([*call, *bridge(daemon, "default")])
    assert sorted(seen["tools"]) == sorted(f"mcp__many__tool{i}" for i in range(2000))
    assert seen["text"] == ["tool1999:ts"]
