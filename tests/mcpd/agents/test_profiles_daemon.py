"""Profiles in a running daemon: chosen by socket, by mcpd/useProfile and by the bridge;
two agents on two profiles at once; a reload that tells exactly the affected agents;
what status and `mcpd tools --profile` say; a profile matching no tool refused."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.loading.load import load
from mcpd.config.tables.model import ConfigError
from tests.support.clients.agent import connect, make_config, running
from tests.support.clients.bridge import BridgeProcess
from tests.support.system.peer_probe import PEER_PROBE
from tests.support.system.peer_user import needs_root, peer_uid, run_as, shared_dir
from tests.support.system.procs import scripted


def server(*flags: str) -> str:
    command, args = scripted(*flags)
    return f"command = {json.dumps(command)}\nargs = {json.dumps(list(args))}\n"


def server_table(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


def write_config(path: Path, tmp: Path, profiles: str) -> None:
    path.write_text(
        f'[daemon]\nsocket = "{tmp / "mcpd.sock"}"\nbackoff_base = 0.05\n'
        f"[servers.code]\n{server('--names', 'git_status,git_log,read_file')}"
        f"[servers.mail]\n{server('--names', 'send_mail,read_inbox')}\n{profiles}"
    )


PROFILES = """
[profiles.dev]
servers = ["code"]
template = "{alias}__{tool}"
max_length = 53
socket = "SOCK"
socket_mode = "0660"

[profiles.mail]
servers = ["mail"]
tools = { deny = ["send_*"] }
"""


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [t["name"] for t in tools]


async def test_two_agents_on_two_profiles_see_different_lists(tmp_path: Path) -> None:
    path = tmp_path / "mcpd.toml"
    dev_sock = tmp_path / "dev.sock"
    write_config(path, tmp_path, PROFILES.replace("SOCK", str(dev_sock)))
    with trio.fail_after(60):
        async with (
            running(load(path), str(path)) as daemon,
            connect(str(dev_sock)) as dev,
            connect(daemon.socket_path) as mail,
            connect(daemon.socket_path) as everything,
        ):
            assert stat.S_IMODE(dev_sock.stat().st_mode) == 0o660
            await mail.use_profile("mail")
            seen: dict[str, list[str]] = {}

            async def list_for(key: str, agent: Any) -> None:
                seen[key] = names(await agent.tools())

            async with trio.open_nursery() as nursery:
                for key, agent in (("dev", dev), ("mail", mail), ("all", everything)):
                    nursery.start_soon(list_for, key, agent)
            assert seen["dev"] == ["code__git_log", "code__git_status", "code__read_file"]
            assert seen["mail"] == ["mcp__mail__read_inbox"]
            discovered = await dev.result("server/discover")
            assert "Tool names are <server>__<tool>;" in discovered["instructions"]
            assert len(seen["all"]) == 5
            assert (await dev.call("code__git_log", {"text": "x"}))["content"][0]["text"] == (
                "git_log:x"
            )
            # Another profile's tools are not there to call, and a profile socket is its own.
            denied = await mail.call("mcp__mail__send_mail")
            assert denied["isError"] is True and "Unknown tool" in denied["content"][0]["text"]
            assert (await dev.call("mcp__code__git_log"))["isError"] is True
            refused = await dev.rpc("mcpd/useProfile", {"profile": "mail"})
            assert "serves the profile 'dev' only" in refused["error"]["message"]
            unknown = await mail.rpc("mcpd/useProfile", {"profile": "nope"})
            assert "profiles: default, dev, mail" in unknown["error"]["message"]
            status = await everything.result("mcpd/status")
            rows = {p["name"]: p for p in status["profiles"]}
            assert {n: (p["tools"], p["listed"], p["agents"]) for n, p in rows.items()} == {
                "default": (5, 5, 1),
                "dev": (3, 3, 1),
                "mail": (1, 1, 1),
            }
            assert rows["dev"]["socket"] == str(dev_sock)
            assert rows["dev"]["naming"] == {"template": "{alias}__{tool}", "max_length": 53}


async def test_a_reload_that_changes_one_profile_tells_its_agents_only(tmp_path: Path) -> None:
    path = tmp_path / "mcpd.toml"
    dev_sock = tmp_path / "dev.sock"
    profiles = PROFILES.replace("SOCK", str(dev_sock))
    write_config(path, tmp_path, profiles)
    with trio.fail_after(60):
        async with (
            running(load(path), str(path)) as daemon,
            connect(str(dev_sock), modern=False) as dev,
            connect(str(dev_sock)) as dev_listener,
            connect(daemon.socket_path, modern=False) as mail,
            connect(daemon.socket_path, modern=False) as default,
        ):
            for agent in (dev, mail, default):
                await agent.initialize()
            await mail.use_profile("mail")
            await dev_listener.send_raw(
                b'{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{'
                b'"notifications":{"toolsListChanged":true},"_meta":'
                + json.dumps(dev_listener_meta()).encode()
                + b"}}\n"
            )
            await dev_listener.wait_notifications(1)  # the acknowledgement
            before = names(await dev.tools())
            write_config(
                path,
                tmp_path,
                profiles.replace(
                    'servers = ["code"]\n', 'servers = ["code"]\ntools = { deny = ["read_*"] }\n'
                ),
            )
            report = await default.result("mcpd/reload")
            assert report["changed"] == [] and report["added"] == []
            await dev.wait_notifications(1)
            await dev_listener.wait_notifications(2)
            # Anything broadcast to the others went out in the same pass, before this.
            for agent in (mail, default):
                assert await agent.result("ping") == {}
                assert agent.notifications == []
            assert dev.notifications[0]["method"] == "notifications/tools/list_changed"
            tagged = dev_listener.notifications[1]
            assert tagged["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L"
            after = names(await dev.tools())
            assert before == ["code__git_log", "code__git_status", "code__read_file"]
            assert after == ["code__git_log", "code__git_status"]
            assert daemon.agent_server.profiles.get("dev") is not None


def dev_listener_meta() -> dict[str, Any]:
    from tests.support.clients.agent import META

    return META


async def test_reload_binds_new_profile_sockets_and_closes_removed_ones(tmp_path: Path) -> None:
    path = tmp_path / "mcpd.toml"
    dev_sock, ops_sock = tmp_path / "dev.sock", tmp_path / "ops.sock"
    write_config(path, tmp_path, PROFILES.replace("SOCK", str(dev_sock)))
    with trio.fail_after(60):
        async with (
            running(load(path), str(path)),
            connect(str(dev_sock), modern=False) as dev,
            connect(str(tmp_path / "mcpd.sock"), modern=False) as mail,
        ):
            for agent in (dev, mail):
                await agent.initialize()
            await mail.use_profile("mail")
            assert len(await dev.tools()) == 3 and len(await mail.tools()) == 1
            write_config(path, tmp_path, f'[profiles.ops]\nsocket = "{ops_sock}"\n')
            await mail.result("mcpd/reload")
            assert not dev_sock.exists()
            await dev.closed.wait()  # its socket is gone, and so are its connections
            async with connect(str(ops_sock)) as ops:
                assert len(await ops.tools()) == 5
            # An agent that chose a removed profile is told, and is listed nothing.
            await mail.wait_notifications(1)
            assert await mail.tools() == []
            assert (
                "no profile named 'mail'"
                in (await mail.rpc("mcpd/useProfile", {"profile": "mail"}))["error"]["message"]
            )
    assert not ops_sock.exists()


async def test_a_profile_that_matches_no_tool_is_refused_at_start_and_reload(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcpd.toml"
    write_config(path, tmp_path, '[profiles.dev]\ntools = { allow = ["gti_*"] }\n')
    with trio.fail_after(60), pytest.raises(ConfigError) as info:
        async with running(load(path), str(path)):
            pass
    assert info.value.path == "profiles.dev.tools"
    write_config(path, tmp_path, '[profiles.dev]\ntools = { allow = ["git_*"] }\n')
    with trio.fail_after(60):
        async with running(load(path), str(path)) as daemon, connect(daemon.socket_path) as agent:
            write_config(path, tmp_path, '[profiles.dev]\npinned = ["code/git_stats"]\n')
            reply = await agent.rpc("mcpd/reload")
            assert "profiles.dev.pinned[0]" in reply["error"]["message"], reply
            assert daemon.config.profiles["dev"].tools.allow == ["git_*"]  # kept


async def start_bridge(sock: str, profile: str) -> BridgeProcess:
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "mcpd", "bridge", "--socket", sock, "--profile", profile],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    return BridgeProcess(proc)


async def test_the_bridge_asks_for_its_profile(tmp_path: Path) -> None:
    cfg = make_config(
        tmp_path,
        {
            "code": {
                "command": scripted("--tools", "3")[0],
                "args": list(scripted("--tools", "3")[1]),
            }
        },
        profiles={"one": {"tools": {"allow": ["tool1"]}, "discovery": "search"}},
    )
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "host", "version": "0"},
    }
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            bridge = await start_bridge(daemon.socket_path, "one")
            try:
                assert "result" in await bridge.ask(1, "initialize", init)
                listed = await bridge.ask(2, "tools/list")
                assert names(listed["result"]["tools"]) == [
                    "mcpd_search_tools",
                    "mcpd_describe_tools",
                    "mcpd_call_tool",
                ]
                called = await bridge.ask(
                    3,
                    "tools/call",
                    {"name": "mcpd_call_tool", "arguments": {"name": "mcp__code__tool1"}},
                )
                assert called["result"]["content"][0]["text"] == "tool1:"
            finally:
                bridge.proc.kill()
                await bridge.proc.wait()
            wrong = await start_bridge(daemon.socket_path, "two")
            try:
                reply = await wrong.ask(1, "initialize", init)
                assert (
                    "no profile named 'two' (profiles: default, one)" in reply["error"]["message"]
                )
            finally:
                wrong.proc.kill()
                await wrong.proc.wait()


async def test_mcpd_tools_and_status_show_each_profile(tmp_path: Path) -> None:
    cfg = make_config(
        tmp_path,
        {"code": server_table("--tools", "30")},
        profiles={
            "few": {
                "discovery": "auto",
                "max_tools": 10,
                "pinned": ["tool0"],
                "template": "{alias}__{tool}",
                "max_length": 40,
            }
        },
    )
    mcpd = [sys.executable, "-m", "mcpd"]
    env = {**os.environ, "MCPD_SOCKET": str(tmp_path / "mcpd.sock")}
    with trio.fail_after(60):
        async with running(cfg):
            out = await trio.run_process(
                [*mcpd, "tools", "--profile", "few"], capture_stdout=True, env=env
            )
            status = await trio.run_process([*mcpd, "status"], capture_stdout=True, env=env)
    text = out.stdout.decode()
    assert "code__tool29" in text and "mcp__code__" not in text
    assert text.rstrip().endswith(
        "30 tools; profile few is in search mode (discovery auto): its agents are listed 4 "
        "tools (mcpd_search_tools, mcpd_describe_tools, mcpd_call_tool, code__tool0) and "
        "find these by searching"
    )
    lines = status.stdout.decode().splitlines()
    table = lines[lines.index(next(x for x in lines if x.startswith("PROFILE"))) :]
    # `mcpd status` itself is no agent of the default profile's.
    assert " ".join(table[1].split()) == "default all 30 30 0 mcp__{alias}__{tool} <= 64"
    assert " ".join(table[2].split()) == "few auto (search) 30 4 0 {alias}__{tool} <= 40"


@needs_root
async def test_a_profile_socket_has_its_own_peers(tmp_path: Path) -> None:
    uid = peer_uid()
    shared = shared_dir()

    async def as_user(sock: Path, *requests: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
        out = await run_as(uid, PEER_PROBE, str(sock), json.dumps(requests))
        return [json.loads(line) for line in out.decode().splitlines() if line]

    def cfg(**daemon: Any) -> Any:
        profile = {
            "servers": ["code"],
            "socket": str(shared / "dev.sock"),
            "socket_mode": "0666",
            "allow_uids": [uid],
        }
        return make_config(
            tmp_path,
            {"code": server_table("--tools", "2"), "mail": server_table("--tools", "1")},
            profiles={"dev": profile},
            socket=str(shared / "mcpd.sock"),
            socket_mode="0666",
            **daemon,
        )

    with trio.fail_after(60):
        async with running(cfg()):
            (main,) = await as_user(shared / "mcpd.sock", ("tools/list", {}))
            assert f"uid {uid} may not use this socket" in main["error"]["message"]
            listed, other = await as_user(
                shared / "dev.sock", ("tools/list", {}), ("mcpd/useProfile", {"profile": "default"})
            )
            assert names(listed["result"]["tools"]) == ["mcp__code__tool0", "mcp__code__tool1"]
            assert "serves the profile 'dev' only" in other["error"]["message"]
        async with running(cfg(allow_uids=[uid])):
            # Allowed on the daemon's socket is not allowed to take a profile's own.
            everything, taken = await as_user(
                shared / "mcpd.sock", ("tools/list", {}), ("mcpd/useProfile", {"profile": "dev"})
            )
            assert len(everything["result"]["tools"]) == 3
            assert "served on its own socket" in taken["error"]["message"]


async def unix_http(sock: Path, method: str, path: str, body: bytes = b"", **headers: str) -> Any:
    from tests.support.clients.daemon_http import Reply

    stream = await trio.open_unix_socket(str(sock))
    head = [
        f"{method} {path} HTTP/1.1",
        "Host: mcpd",
        "Connection: close",
        f"Content-Length: {len(body)}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
    ]
    head += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    await stream.send_all(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    data = b""
    while chunk := await stream.receive_some(1 << 16):
        data += chunk
    await stream.aclose()
    return Reply(data)


async def test_http_on_a_profile_socket_serves_that_profile(tmp_path: Path) -> None:
    path = tmp_path / "mcpd.toml"
    dev_sock, main_sock = tmp_path / "dev.sock", tmp_path / "mcpd.sock"
    write_config(path, tmp_path, PROFILES.replace("SOCK", str(dev_sock)))
    init = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "h", "version": "0"},
            },
        }
    ).encode()
    listing = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).encode()
    with trio.fail_after(60):
        async with running(load(path), str(path)):
            tools = (await unix_http(dev_sock, "GET", "/tools")).json()["tools"]
            assert names(tools) == ["code__git_log", "code__git_status", "code__read_file"]
            other = await unix_http(dev_sock, "GET", "/tools?profile=mail")
            assert other.status == 403 and "'dev' only" in other.body.decode()
            mail = (await unix_http(main_sock, "GET", "/tools?profile=mail")).json()["tools"]
            assert names(mail) == ["mcp__mail__read_inbox"]
            elsewhere = await unix_http(main_sock, "POST", "/mcp", init)
            session = elsewhere.headers["mcp-session-id"]
            borrowed = await unix_http(dev_sock, "POST", "/mcp", listing, Mcp_Session_Id=session)
            assert borrowed.status == 404  # a session of the daemon's socket is not the dev one
            here = (await unix_http(dev_sock, "POST", "/mcp", init)).headers["mcp-session-id"]
            own = await unix_http(dev_sock, "POST", "/mcp", listing, Mcp_Session_Id=here)
            assert len(own.json()["result"]["tools"]) == 3
