"""Servers that ask back (elicitation, sampling, roots), through mcpd, in every pairing
of eras, over stdio and Streamable HTTP, with an official SDK server that asks the
way its connection's era wants (mid-call requests, or input_required)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import META, make_config, running
from tests.support.clients.answering import AnsweringAgent, connect_answering
from tests.support.hosts.peers import console_script
from tests.support.hosts.third_party import lines, tapped
from tests.support.hosts.wiretap import free_port, serve

ASKING = str(Path(__file__).with_name("servers") / "asking_server.py")
CAPS = {"elicitation": {}, "sampling": {}, "roots": {"listChanged": True}}
CALLS = [("greet", {}), ("muse", {"topic": "sky"}), ("where", {})]
TEXTS = {
    "greet": "Hello, Ada!",
    "muse": "The model says 'blue' about sky",
    "where": "roots: file:///work/a",
}
ANSWERS: dict[str, Any] = {
    "elicitation/create": {"action": "accept", "content": {"name": "Ada"}},
    "sampling/createMessage": {
        "role": "assistant",
        "content": {"type": "text", "text": "blue"},
        "model": "m",
        "stopReason": "endTurn",
    },
    "roots/list": {"roots": [{"uri": "file:///work/a", "name": "a"}]},
}


def answer(method: str, params: Any) -> Any:
    return ANSWERS[method]


@contextlib.asynccontextmanager
async def asking(transport: str) -> AsyncIterator[dict[str, Any]]:
    """The asking server's config entry (its HTTP process runs meanwhile)."""
    if transport == "stdio":
        yield {"command": sys.executable, "args": [ASKING, "stdio"]}
        return
    port = free_port()
    async with serve([sys.executable, ASKING, "http", str(port)], port) as server:
        yield {"url": server.url()}


async def modern_call(agent: AnsweringAgent, tool: str, args: dict[str, Any]) -> list[Any]:
    """Call as a modern agent does: answer input_required and call again, until done."""
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": CAPS}
    params: dict[str, Any] = {"name": f"mcp__ask__{tool}", "arguments": args, "_meta": meta}
    rounds = []
    for _ in range(4):
        reply = await agent.rpc("tools/call", params)
        result = reply["result"]
        rounds.append(result)
        if result.get("resultType") != "input_required":
            return rounds
        asked = result["inputRequests"]
        params = {**params, "inputResponses": {k: answer(v["method"], v) for k, v in asked.items()}}
        if "requestState" in result:
            params["requestState"] = result["requestState"]
    raise AssertionError(f"no end to the rounds: {rounds}")


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("server_era", ["legacy", "modern"])
@pytest.mark.parametrize("agent_era", ["legacy", "modern"])
async def test_the_agent_behind_a_call_answers_what_its_server_asks(
    tmp_path: Path, transport: str, server_era: str, agent_era: str
) -> None:
    modern = agent_era == "modern"
    with trio.fail_after(90):
        async with asking(transport) as entry:
            # The SDK's server may take longer than the default probe_timeout to start
            # on a busy machine, which would read as a server of no modern era.
            cfg = make_config(tmp_path, {"ask": {**entry, "era": server_era}}, probe_timeout=60.0)
            async with running(cfg) as daemon:
                async with connect_answering(daemon.socket_path, modern, answer) as agent:
                    if not modern:
                        await agent.initialize_with(CAPS)
                    for tool, args in CALLS:
                        if modern:
                            rounds = await modern_call(agent, tool, args)
                            result = rounds[-1]
                            asked = [r["inputRequests"] for r in rounds[:-1]]
                            assert len(asked) == 1  # one question, asked once
                            [key] = asked[0]
                            if server_era == "legacy":
                                # mcpd made the round of a mid-call request: its own key
                                # and its own state, which the retry turned into the answer.
                                assert key == "mcpd_1"
                                assert rounds[0]["requestState"].startswith("mcpd-ask:")
                            else:
                                assert not key.startswith("mcpd")  # the server's own
                        else:
                            reply = await agent.rpc(
                                "tools/call", {"name": f"mcp__ask__{tool}", "arguments": args}
                            )
                            result = reply["result"]
                        assert result["content"][0]["text"] == TEXTS[tool], result
                        assert result.get("isError") is not True
                    # A legacy agent was asked with requests of mcpd's own; a modern
                    # one never is (it got input_required instead).
                    if modern:
                        assert agent.asked == []
                    else:
                        assert [m["method"] for m in agent.asked] == list(ANSWERS)
                        assert all(str(m["id"]).startswith("mcpd-") for m in agent.asked)
                daemon.stop()


async def test_an_agent_is_never_asked_what_it_did_not_declare(tmp_path: Path) -> None:
    server = {"command": sys.executable, "args": [ASKING, "stdio"], "era": "legacy"}
    cfg = make_config(tmp_path, {"ask": server})
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            async with connect_answering(daemon.socket_path, False, answer) as legacy:
                await legacy.initialize_with({"sampling": {}})  # no elicitation, no roots
                reply = await legacy.rpc("tools/call", {"name": "mcp__ask__greet", "arguments": {}})
                # The server was refused and passed the reason on as its answer.
                assert "did not declare the elicitation" in reply["error"]["message"]
                muse = await legacy.result(
                    "tools/call", {"name": "mcp__ask__muse", "arguments": {"topic": "sky"}}
                )
                assert muse["content"][0]["text"] == TEXTS["muse"]
                assert [m["method"] for m in legacy.asked] == ["sampling/createMessage"]
            async with connect_answering(daemon.socket_path, True, answer) as modern:
                # Declaring nothing: the server is refused for it, and says why.
                reply = await modern.rpc("tools/call", {"name": "mcp__ask__greet", "arguments": {}})
                assert "did not declare the elicitation" in reply["error"]["message"]
            daemon.stop()


async def test_an_agent_that_hangs_up_while_asked_leaves_the_server_an_error_at_once(
    tmp_path: Path,
) -> None:
    log = tmp_path / "asking.in"
    server = tapped(log, sys.executable, [ASKING, "stdio"], era="legacy")
    cfg = make_config(tmp_path, {"ask": server})
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            async with connect_answering(daemon.socket_path, False, answer) as other:
                await other.initialize_with(CAPS)
                async with connect_answering(daemon.socket_path, False, answer) as leaving:
                    await leaving.initialize_with(CAPS)
                    leaving.hold = True  # it reads the request and never answers
                    await leaving.send_raw(
                        b'{"jsonrpc":"2.0","id":9,"method":"tools/call",'
                        b'"params":{"name":"mcp__ask__greet","arguments":{}}}\n'
                    )
                    [asked] = await leaving.wait_asked(1)
                    assert asked["method"] == "elicitation/create"
                    gone_at = trio.current_time()
                # The server's request got its answer, an error, right away: well before
                # the ask_timeout (120 s) or the call's own time limit (60 s).
                with trio.fail_after(5):
                    while not any("error" in m and "id" in m for m in lines(log)):
                        await trio.sleep(0.02)
                assert trio.current_time() - gone_at < 5
                [refusal] = [m for m in lines(log) if "error" in m and "id" in m]
                assert "disconnected" in refusal["error"]["message"]
                # Nobody else noticed.
                reply = await other.result(
                    "tools/call", {"name": "mcp__ask__nap", "arguments": {"seconds": 0.01}}
                )
                assert reply["content"][0]["text"] == "slept 0.01"
                greet = await other.result("tools/call", {"name": "mcp__ask__greet"})
                assert greet["content"][0]["text"] == TEXTS["greet"]
            daemon.stop()


async def test_an_agent_that_does_not_answer_in_time_leaves_the_server_an_error(
    tmp_path: Path,
) -> None:
    cfg = make_config(
        tmp_path,
        {"ask": {"command": sys.executable, "args": [ASKING, "stdio"], "era": "legacy"}},
        ask_timeout=0.5,
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            async with connect_answering(daemon.socket_path, False, answer) as slow:
                await slow.initialize_with(CAPS)
                slow.hold = True
                reply = await slow.rpc("tools/call", {"name": "mcp__ask__greet", "arguments": {}})
                # The server got mcpd's error for its request and answered the call with it.
                message = reply["error"]["message"]
                assert "did not answer elicitation/create within 0.5 s" in message
                [asked] = slow.asked
                # And the agent was told it need not ask its user any more.
                cancels = [
                    n for n in slow.notifications if n["method"] == "notifications/cancelled"
                ]
                assert [c["params"]["requestId"] for c in cancels] == [asked["id"]]
            daemon.stop()


async def test_a_request_no_single_agent_caused_is_refused(tmp_path: Path) -> None:
    """On stdio nothing ties a server's request to a call: with two agents' calls in
    flight, mcpd does not guess whose it is."""
    log = tmp_path / "asking.in"
    server = tapped(log, sys.executable, [ASKING, "stdio"], era="legacy")
    cfg = make_config(tmp_path, {"ask": server})
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            async with (
                connect_answering(daemon.socket_path, False, answer) as a,
                connect_answering(daemon.socket_path, False, answer) as b,
            ):
                await a.initialize_with(CAPS)
                await b.initialize_with(CAPS)
                async with trio.open_nursery() as nursery:
                    nap = {"name": "mcp__ask__nap", "arguments": {"seconds": 3}}
                    nursery.start_soon(b.result, "tools/call", nap)
                    # b's call is under way when a's call makes the server ask.
                    while not any(m.get("method") == "tools/call" for m in lines(log)):
                        await trio.sleep(0.02)
                    reply = await a.rpc("tools/call", {"name": "mcp__ask__greet", "arguments": {}})
                    assert "cannot tell which agent" in reply["error"]["message"]
                assert a.asked == [] and b.asked == []
            refused = [m for m in lines(log) if "error" in m and "id" in m]
            assert "cannot tell which agent" in refused[0]["error"]["message"]
            daemon.stop()


@pytest.mark.parametrize("server_era", ["legacy", "modern"])
@pytest.mark.parametrize("client_mode", ["legacy", "auto"])
async def test_the_official_sdk_client_answers_through_the_bridge(
    tmp_path: Path, server_era: str, client_mode: str
) -> None:
    """The SDK client's own elicitation, sampling and roots callbacks answer the SDK
    server's questions, whichever era each side speaks."""
    server = {"command": sys.executable, "args": [ASKING, "stdio"], "era": server_era}
    cfg = make_config(tmp_path, {"ask": server})
    client = str(Path(__file__).with_name("sdk_client_asks.py"))
    with trio.fail_after(120):
        async with running(cfg) as daemon:
            bridge = [console_script("mcpd"), "bridge", "--socket", daemon.socket_path]
            out = await trio.run_process(
                [sys.executable, client, client_mode, "--", *bridge],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            daemon.stop()
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    seen = json.loads(out.stdout.decode().strip().splitlines()[-1])
    assert seen["version"] == ("2026-07-28" if client_mode == "auto" else "2025-11-25")
    assert {tool: seen[tool] for tool in TEXTS} == TEXTS
    # Whichever era the server speaks, its question says it is the server's.
    question = "[mcpd] The server 'ask' asks:\n> What is your name?"
    assert seen["asked"] == [f"elicitation: {question}", "sampling", "roots"]
