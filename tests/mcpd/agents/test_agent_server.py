"""The agent socket end to end: a real daemon, real server processes, real sockets."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.agents.entry.places import OWNER_RESERVE
from mcpd.starting.cannot_start import DaemonError
from protocol.jsonrpc.messages import MAX_ID_LENGTH
from tests.support.clients.agent import connect, make_config, running, two_agents
from tests.support.system.procs import read_pid, scripted


def server(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


def text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


async def test_modern_agent_discovers_lists_and_calls(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server("--tools", "2"), "beta": server("--tools", "1")})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            found = await agent.result("server/discover")
            assert found["supportedVersions"] == ["2026-07-28"]
            assert found["resultType"] == "complete"
            assert found["capabilities"]["tools"] == {"listChanged": True}
            listed = await agent.result("tools/list")
            assert listed["resultType"] == "complete"
            names = [t["name"] for t in listed["tools"]]
            assert names == ["mcp__alpha__tool0", "mcp__alpha__tool1", "mcp__beta__tool0"]
            states = {s["server"]: s["state"] for s in listed["_meta"]["mcpd/servers"]}
            assert states == {"alpha": "ready", "beta": "ready"}
            result = await agent.call("mcp__beta__tool0", {"text": "hi"})
            # The server saw its own tool name, not the local one.
            assert text(result) == "tool0:hi"
            assert result["resultType"] == "complete"


async def test_legacy_agent_handshake_ping_list_call(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server()})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path, modern=False) as agent:
            init = await agent.initialize()
            assert init["protocolVersion"] == "2025-11-25"
            assert init["serverInfo"]["name"] == "mcpd"
            assert init["capabilities"]["tools"]["listChanged"] is True
            assert await agent.result("ping") == {}
            tools = await agent.tools()
            assert len(tools) == 3
            assert "resultType" not in await agent.result("tools/list")
            result = await agent.call("mcp__alpha__tool2", {"text": "x"})
            assert text(result) == "tool2:x"


async def test_unknown_version_and_missing_meta_are_protocol_errors(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server()})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            reply = await agent.rpc(
                "tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "1999-01-01"}}
            )
            assert reply["error"]["code"] == -32022
            assert "2026-07-28" in reply["error"]["data"]["supported"]
            assert "2025-11-25" in reply["error"]["data"]["supported"]
            reply = await agent.rpc("tools/list", meta=False)
            assert reply["error"]["code"] == -32602
            reply = await agent.rpc("no/such/method")
            assert reply["error"]["code"] == -32601


async def test_a_legacy_version_named_in_meta_is_refused_offering_only_modern_ones(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path, {"alpha": server()})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            meta = {"io.modelcontextprotocol/protocolVersion": "2025-11-25"}
            reply = await agent.rpc("tools/list", {"_meta": meta})
            assert reply["error"]["code"] == -32022
            assert reply["error"]["data"] == {
                "supported": ["2026-07-28"],
                "requested": "2025-11-25",
            }


async def test_mcpds_own_results_to_a_modern_agent_carry_their_result_type(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path, {"alpha": server()})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            assert await agent.result("ping") == {"resultType": "complete"}
            status = await agent.result("mcpd/status")
            assert status["resultType"] == "complete" and "servers" in status


async def test_tools_list_pages_with_an_opaque_cursor(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server("--tools", "5")}, page_size=2)
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            first = await agent.result("tools/list")
            assert len(first["tools"]) == 2 and first["nextCursor"]
            tools = await agent.tools()
            assert [t["name"] for t in tools] == [f"mcp__alpha__tool{i}" for i in range(5)]
            bad = await agent.rpc("tools/list", {"cursor": "not-a-cursor"})
            assert bad["error"]["code"] == -32602


async def test_unknown_tool_is_an_error_result_naming_close_names(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server()})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            result = await agent.call("mcp__alpha__tool")
            assert result["isError"] is True
            assert "mcp__alpha__tool0" in text(result)


async def test_server_protocol_error_is_passed_on_as_json_rpc_error(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server("--names", "rpc_error,fail")})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            reply = await agent.rpc("tools/call", {"name": "mcp__alpha__rpc_error"})
            assert reply["error"] == {
                "code": -32602,
                "message": "[alpha] invalid arguments for rpc_error",
            }
            # A tool's own failure is a result, and the server stays healthy.
            result = await agent.call("mcp__alpha__fail")
            assert result["isError"] is True and text(result) == "it failed"
            status = await agent.result("mcpd/status")
            assert status["servers"][0]["state"] == "ready"


async def test_many_agents_many_calls_each_answered_once(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server("--slow", "0.01"), "beta": server()})
    answers: dict[tuple[int, int], str] = {}
    with trio.fail_after(60):
        async with running(cfg) as daemon:

            async def agent_task(n: int) -> None:
                async with connect(daemon.socket_path) as agent:

                    async def one(i: int) -> None:
                        name = "mcp__alpha__tool1" if i % 2 else "mcp__beta__tool0"
                        result = await agent.call(name, {"text": f"{n}-{i}"})
                        answers[(n, i)] = text(result)

                    async with trio.open_nursery() as nursery:
                        for i in range(10):
                            nursery.start_soon(one, i)
                    assert agent.unmatched == []

            async with trio.open_nursery() as nursery:
                for n in range(20):
                    nursery.start_soon(agent_task, n)
    assert len(answers) == 200
    for (n, i), value in answers.items():
        assert value == (f"tool1:{n}-{i}" if i % 2 else f"tool0:{n}-{i}")


async def test_malformed_json_gets_parse_error_and_the_connection_stays(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server()})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            await agent.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
            replies = await agent.wait_unmatched(1)
            assert replies[0]["error"]["code"] == -32700
            assert replies[0]["id"] is None
            await agent.send_raw(b'{"jsonrpc":"2.0","id":"p","method":"tools/call","params":7}\n')
            replies = await agent.wait_unmatched(2)
            assert replies[1]["id"] == "p"
            assert replies[1]["error"]["code"] == -32602
            assert text(await agent.call("mcp__alpha__tool0", {"text": "still"})) == "tool0:still"


async def test_oversized_line_closes_only_that_connection(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server()}, max_line_bytes=4096)
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as good:
            async with connect(daemon.socket_path) as bad:
                await bad.send_raw(
                    b'{"jsonrpc":"2.0","id":1,"method":"x","params":"' + b"a" * 10_000
                )
                await bad.closed.wait()
                assert "line limit" in bad.unmatched[0]["error"]["message"]
            assert text(await good.call("mcp__alpha__tool0", {"text": "ok"})) == "tool0:ok"


async def test_a_server_killed_mid_call_gives_an_outage_result(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    cfg = make_config(
        tmp_path,
        {
            "crashy": server("--slow", "30", "--pid-file", str(pidfile)),
            "steady": server(),
        },
    )
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            pid = await read_pid(pidfile)
            # Status names the child, so a user knows what to look at (or kill).
            rows = {s["alias"]: s for s in (await agent.result("mcpd/status"))["servers"]}
            assert rows["crashy"]["pid"] == pid
            results: list[dict[str, Any]] = []

            async def slow_call() -> None:
                results.append(await agent.call("mcp__crashy__tool0"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow_call)
                while daemon.supervisor.servers["crashy"].inflight == 0:
                    await trio.sleep(0.01)
                os.kill(pid, signal.SIGKILL)
                assert text(await agent.call("mcp__steady__tool0", {"text": "a"})) == "tool0:a"
            result = results[0]
            assert result["isError"] is True
            assert "crashy" in text(result) and "SIGKILL" in text(result)
            outage = result["_meta"]["mcpd/outage"]
            assert outage["server"] == "crashy"
            assert "SIGKILL" in outage["reason"]
            assert text(await agent.call("mcp__steady__tool0", {"text": "b"})) == "tool0:b"


async def test_long_results_are_cut_to_the_budget_with_a_note(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"big": server("--big", "20000")}, result_budget_chars=8000)
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            result = await agent.call("mcp__big__tool0")
            blocks = result["content"]
            assert len(blocks[0]["text"]) == 8000
            assert "12000 more characters were cut" in blocks[-1]["text"]


async def test_socket_file_mode_stale_replacement_and_live_refusal(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "mcpd.sock"
    path.parent.mkdir()
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()  # a socket file nobody listens on: a dead daemon's leftover
    cfg = make_config(tmp_path, {"alpha": server()}, socket=str(path))
    with trio.fail_after(30):
        async with running(cfg):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            with pytest.raises(DaemonError, match="something already listens on"):
                async with running(cfg):
                    pass
        assert not path.exists()


async def test_socket_directory_is_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "mcpd.sock"
    cfg = make_config(tmp_path, {}, socket=str(path), socket_mode="0660")
    with trio.fail_after(30):
        async with running(cfg):
            assert stat.S_IMODE(path.stat().st_mode) == 0o660


async def test_legacy_agents_hear_about_tool_list_changes(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    cfg = make_config(tmp_path, {"alpha": server("--pid-file", str(pidfile))})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path, modern=False) as agent:
            await agent.initialize()
            await agent.tools()
            os.kill(await read_pid(pidfile), signal.SIGKILL)
            await agent.notified.wait()
            assert agent.notifications[0] == {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
            }


async def test_request_ids_are_echoed_exactly(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server()})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            for rid in ["abc", 0, -5, 2**62, "x" * MAX_ID_LENGTH]:
                reply = await agent.rpc("ping", rid=rid)
                assert reply["id"] == rid
            reply = await agent.rpc("tools/list", rid="dup")
            assert json.dumps(reply["id"]) == '"dup"'


async def test_connection_and_in_flight_limits_answer_with_an_error(tmp_path: Path) -> None:
    cfg = make_config(
        tmp_path, {"slow": server("--slow", "1")}, max_connections=2, max_inflight_per_connection=2
    )
    with trio.fail_after(30):
        async with two_agents(cfg) as (daemon, first, second):
            await first.result("ping")
            await second.result("ping")
            # The daemon's own user has a few more places than everyone else together.
            async with contextlib.AsyncExitStack() as reserve:
                for _ in range(OWNER_RESERVE):
                    extra = await reserve.enter_async_context(connect(daemon.socket_path))
                    await extra.result("ping")
                async with connect(daemon.socket_path) as over:
                    await over.closed.wait()
                    refusal = over.unmatched[0]["error"]["message"]
                    assert f"too many connections (limit 2, and the {OWNER_RESERVE} kept" in refusal
            replies: list[dict[str, Any]] = []

            async def call(i: int) -> None:
                replies.append(await first.rpc("tools/call", {"name": "mcp__slow__tool0"}))

            async with trio.open_nursery() as nursery:
                for i in range(3):
                    nursery.start_soon(call, i)
                    await trio.sleep(0.05)
            errors = [r for r in replies if "error" in r]
            assert len(errors) == 1
            assert (
                "too many requests in flight on this connection (limit 2)"
                in errors[0]["error"]["message"]
            )
            assert sum("result" in r for r in replies) == 2


async def test_a_huge_unknown_tool_name_is_not_echoed_back_whole(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server()})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            result = await agent.call("x" * 100_000)
            assert result["isError"] is True
            assert "(100000 characters)" in text(result)
            assert len(text(result)) < 1000
