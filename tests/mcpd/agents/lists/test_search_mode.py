"""Search mode end to end: a 300-tool profile listed as a handful of tools, search and
describe over it, and calls through mcpd_call_tool that keep every guarantee of a
direct call, down to the reply's bytes."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import META, connect, make_config, running
from tests.support.system.procs import read_pid, scripted


def server(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


def text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


def received(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


BIG = {"a": server("--tools", "100"), "b": server("--tools", "100"), "c": server("--tools", "100")}
SEARCH = {"discovery": "search", "pinned": ["a/tool0"]}


def meta_call(name: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {"name": "mcpd_call_tool", "arguments": {"name": name, "arguments": arguments}, **params}


async def test_a_300_tool_profile_in_search_mode_lists_under_10_tools(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, BIG, profiles={"big": SEARCH})
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            assert len(await agent.tools()) == 300  # the default profile lists everything
            chosen = await agent.use_profile("big")
            assert chosen["mode"] == "search" and chosen["count"] == 300
            tools = await agent.tools()
            names = [t["name"] for t in tools]
            assert names == [
                "mcpd_search_tools",
                "mcpd_describe_tools",
                "mcpd_call_tool",
                "mcp__a__tool0",
            ]
            assert len(tools) < 10
            assert "300 tools from: a, b, c." in tools[0]["description"]
            discover = await agent.result("server/discover")
            assert "mcpd_search_tools" in discover["instructions"]
            # Every tool is still found, described and callable by name.
            found = await agent.call("mcpd_search_tools", {"query": "mcp__c__tool42"})
            assert found["structuredContent"]["tools"][0]["name"] == "mcp__c__tool42"
            assert found["structuredContent"]["total"] == 300
            described = await agent.call(
                "mcpd_describe_tools", {"names": ["mcp__b__tool7", "mcp__b__nope"]}
            )
            body = described["structuredContent"]
            assert [t["name"] for t in body["tools"]] == ["mcp__b__tool7"]
            assert body["tools"][0]["inputSchema"]["properties"] == {"text": {"type": "string"}}
            assert body["unknown"] == ["mcp__b__nope"]
            assert text(await agent.call("mcp__b__tool7", {"text": "direct"})) == "tool7:direct"
            # tools/list holds no tools here: an unknown name is pointed at the search.
            unknown = text(await agent.call("mcp__b__tool700", {}))
            assert unknown.endswith("Call mcpd_search_tools to find the current tools.")
            bad = await agent.call("mcpd_search_tools", {"limit": 3})
            assert bad["isError"] is True and "query" in text(bad)
            await agent.use_profile("default")
            unknown = text(await agent.call("mcp__b__tool700", {}))
            assert unknown.endswith("Call tools/list for the current tools.")


async def test_an_over_long_query_is_answered_with_its_limit_and_one_at_the_limit_searches(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path, {"a": server("--tools", "3")}, profiles={"s": SEARCH})
    at_limit = ("mcp__a__tool2 " * 1000)[:1000]
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            await agent.use_profile("s")
            refused = await agent.call("mcpd_search_tools", {"query": at_limit + "x"})
            assert refused["isError"] is True and "at most 1000 characters" in text(refused)
            assert "structuredContent" not in refused and "mcp__a__tool2" not in text(refused)
            found = await agent.call("mcpd_search_tools", {"query": at_limit})
            assert "isError" not in found
            assert found["structuredContent"]["tools"][0]["name"] == "mcp__a__tool2"


async def raw_exchange(stream: trio.SocketStream, buf: list[bytes], request: bytes) -> bytes:
    """Send one request line; return the reply line to its id, exactly as it came."""
    rid = json.loads(request)["id"]
    await stream.send_all(request + b"\n")
    while True:
        while b"\n" not in buf[0]:
            data = await stream.receive_some(1 << 16)
            assert data, "the daemon closed the connection"
            buf[0] += data
        line, _, buf[0] = buf[0].partition(b"\n")
        msg = json.loads(line)
        if msg.get("id") == rid and "method" not in msg:
            return line


async def test_a_call_through_the_meta_tool_gives_the_bytes_of_a_direct_call(
    tmp_path: Path,
) -> None:
    cfg = make_config(
        tmp_path,
        {**BIG, "big_text": server("--big", "500")},
        profiles={"big": SEARCH},
        result_budget_chars=120,
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            for modern in (True, False):
                stream = await trio.open_unix_socket(daemon.socket_path)
                buf = [b""]
                meta = {"_meta": META} if modern else {}
                if not modern:
                    init = {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "0"},
                    }
                    await raw_exchange(stream, buf, _req(0, "initialize", init))
                    await stream.send_all(
                        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
                    )
                await raw_exchange(
                    stream, buf, _req(1, "mcpd/useProfile", {"profile": "big", **meta})
                )
                for name in ("mcp__a__tool3", "mcp__big_text__tool0", "mcp__a__nope"):
                    args = {"text": "same"}
                    direct = await raw_exchange(
                        stream,
                        buf,
                        _req(7, "tools/call", {"name": name, "arguments": args, **meta}),
                    )
                    through = await raw_exchange(
                        stream, buf, _req(7, "tools/call", {**meta_call(name, args), **meta})
                    )
                    assert through == direct, (name, modern)
                    if name == "mcp__big_text__tool0":  # the budget applied to both alike
                        assert b"380 more characters were cut here" in direct, direct
                await stream.aclose()


def _req(rid: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()


async def test_progress_and_cancellation_through_the_meta_tool(tmp_path: Path) -> None:
    log = tmp_path / "received.jsonl"
    cfg = make_config(
        tmp_path,
        {
            "p": server("--progress", "3"),
            "h": server("--hang-on-call", "--log-file", str(log)),
        },
        profiles={"s": {"discovery": "search"}},
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            await agent.use_profile("s")
            result = await agent.result(
                "tools/call",
                meta_call("mcp__p__tool1", {"text": "x"}, _meta={"progressToken": "tok"}),
            )
            assert text(result) == "tool1:x"
            progress = [
                n["params"] for n in agent.notifications if n["method"] == "notifications/progress"
            ]
            assert [p["progress"] for p in progress] == [1, 2, 3]
            assert {p["progressToken"] for p in progress} == {"tok"}

            body = {
                "jsonrpc": "2.0",
                "id": "doomed",
                "method": "tools/call",
                "params": {**meta_call("mcp__h__tool0", {}), "_meta": META},
            }
            await agent.send_raw(json.dumps(body).encode() + b"\n")
            runner = daemon.supervisor.servers["h"]
            while runner.inflight == 0:
                await trio.sleep(0.01)
            await agent.send_raw(
                b'{"jsonrpc":"2.0","method":"notifications/cancelled",'
                b'"params":{"requestId":"doomed"}}\n'
            )
            while runner.inflight:
                await trio.sleep(0.01)
            # The server heard of it, and the agent got no answer to what it cancelled.
            assert await agent.result("ping") == {"resultType": "complete"}
            assert agent.unmatched == []
    sent = received(log)
    call = next(m for m in sent if m.get("method") == "tools/call")
    assert call["params"]["name"] == "tool0"  # the server's own name, not the meta-tool's
    cancels = [m for m in sent if m.get("method") == "notifications/cancelled"]
    assert [c["params"]["requestId"] for c in cancels] == [call["id"]]


async def test_timeouts_breaker_and_input_required_through_the_meta_tool(tmp_path: Path) -> None:
    cfg = make_config(
        tmp_path,
        {
            "slow": {**server("--hang-on-call"), "call_timeout": 0.3},
            "dies": server("--die-on-call"),
            "ask": server("--names", "ask"),
        },
        profiles={"s": {"discovery": "search"}},
        failure_threshold=1,
        cooldown_base=60.0,
        cooldown_cap=60.0,
    )
    caps = {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            await agent.use_profile("s")
            timed_out = await agent.call("mcpd_call_tool", {"name": "mcp__slow__tool0"})
            assert timed_out["isError"] is True and "0.3" in text(timed_out)
            first = await agent.call("mcpd_call_tool", {"name": "mcp__dies__tool0"})
            assert first["isError"] is True
            runner = daemon.supervisor.servers["dies"]
            while runner.state != "open":
                await trio.sleep(0.02)
            # The breaker is open now: both ways fail fast with the same words.
            direct = await agent.call("mcp__dies__tool0")
            meta = await agent.call("mcpd_call_tool", {"name": "mcp__dies__tool0"})
            assert direct["isError"] and meta["isError"]
            for result in (direct, meta):
                assert text(result).startswith("The tool server 'dies' is unavailable (")

            asked = await agent.result(
                "tools/call", {**meta_call("mcp__ask__ask", {}), "_meta": caps}
            )
            assert asked["resultType"] == "input_required"
            answer = {"login": {"action": "accept", "content": {"name": "ada"}}}
            retry = await agent.result(
                "tools/call",
                {
                    **meta_call("mcp__ask__ask", {}),
                    "_meta": caps,
                    "inputResponses": answer,
                    "requestState": asked["requestState"],
                },
            )
            assert text(retry) == "hello ada (state-\u00e9-1)"


async def test_outages_show_in_search_results_as_in_the_full_list(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    cfg = make_config(
        tmp_path,
        {"up": server("--tools", "2"), "down": server("--tools", "2", "--pid-file", str(pidfile))},
        profiles={"s": {"discovery": "search"}},
        backoff_base=30.0,
        backoff_cap=30.0,
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            os.kill(await read_pid(pidfile), signal.SIGKILL)
            while daemon.supervisor.servers["down"].available:
                await trio.sleep(0.02)
            full = {
                t["name"]: t for t in (await agent.result("mcpd/tools", {"profile": "s"}))["tools"]
            }
            await agent.use_profile("s")
            found = await agent.call("mcpd_search_tools", {"query": "tool", "limit": 10})
            hits = {t["name"]: t for t in found["structuredContent"]["tools"]}
            assert set(hits) == set(full)
            for name, hit in hits.items():
                listed = full[name]
                assert hit["available"] is listed["_meta"]["mcpd/available"]
                if name.startswith("mcp__down__"):
                    marker = listed["description"].split("] ", 1)[0][1:]
                    assert marker.startswith("unavailable: down ")
                    assert hit["unavailable"] == marker
                    assert hit["description"].startswith(f"[{marker}] [down]")
                    assert f"[{marker}]" in text(found)
                else:
                    assert "unavailable" not in hit
