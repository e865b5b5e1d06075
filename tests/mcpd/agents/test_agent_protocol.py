"""What agents get beyond list and call: progress, cancellation, input_required,
subscriptions, and who may connect at all."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.loading.load import load
from tests.support.clients.agent import connect, make_config, running, two_agents
from tests.support.system.peer_user import ONE_REQUEST, needs_root, peer_uid, run_as, shared_dir
from tests.support.system.procs import scripted

CUSTOM = str(Path(__file__).resolve().parents[2] / "support" / "servers" / "demo_custom.py")
CANNED = str(Path(__file__).resolve().parents[2] / "support" / "servers" / "canned.py")


def server(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


def text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


def received(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


async def test_progress_goes_back_to_its_own_agent_with_its_own_token(tmp_path: Path) -> None:
    log = tmp_path / "received.jsonl"
    cfg = make_config(tmp_path, {"p": server("--progress", "3", "--log-file", str(log))})
    with trio.fail_after(30):
        async with two_agents(cfg) as (_, a, b):
            results = {}

            async def call(agent: Any, key: str) -> None:
                results[key] = await agent.result(
                    "tools/call",
                    {
                        "name": "mcp__p__tool0",
                        "arguments": {"text": key},
                        "_meta": {"progressToken": "same-token"},
                    },
                )

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, a, "a")
                nursery.start_soon(call, b, "b")
            assert text(results["a"]) == "tool0:a" and text(results["b"]) == "tool0:b"
            for agent in (a, b):
                progress = [
                    n["params"]
                    for n in agent.notifications
                    if n["method"] == "notifications/progress"
                ]
                assert [p["progress"] for p in progress] == [1, 2, 3]
                assert {p["progressToken"] for p in progress} == {"same-token"}
    tokens = [
        m["params"]["_meta"]["progressToken"]
        for m in received(log)
        if m.get("method") == "tools/call"
    ]
    assert len(set(tokens)) == 2 and "same-token" not in tokens


async def test_disconnecting_cancels_the_call_upstream(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"c": {"command": sys.executable, "args": [CUSTOM]}})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as watcher:
            async with connect(daemon.socket_path) as leaver:
                with trio.move_on_after(1):  # the call blocks until it is cancelled
                    await leaver.call("mcp__c__sleep")
            # The server saw the cancellation, and the other agent is fine.
            done = await watcher.call("mcp__c__cancelled", {"count": 1})
            assert len(json.loads(text(done))) == 1


async def test_cancelled_request_gets_no_answer_even_when_the_server_answers_late(
    tmp_path: Path,
) -> None:
    log = tmp_path / "received.jsonl"
    cfg = make_config(tmp_path, {"s": server("--slow", "0.3", "--log-file", str(log))})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            await agent.send_raw(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": "doomed",
                        "method": "tools/call",
                        "params": {
                            "name": "mcp__s__tool0",
                            "arguments": {"text": "x"},
                            "_meta": {
                                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                "io.modelcontextprotocol/clientCapabilities": {},
                            },
                        },
                    }
                ).encode()
                + b"\n"
            )
            while daemon.supervisor.servers["s"].inflight == 0:
                await trio.sleep(0.01)
            await agent.send_raw(
                b'{"jsonrpc":"2.0","method":"notifications/cancelled",'
                b'"params":{"requestId":"doomed","reason":"changed my mind"}}\n'
            )
            await trio.sleep(0.6)  # past the server's late answer
            assert text(await agent.call("mcp__s__tool1", {"text": "next"})) == "tool1:next"
            assert agent.unmatched == [], "a cancelled request was answered"
    cancels = [m for m in received(log) if m.get("method") == "notifications/cancelled"]
    assert len(cancels) == 1


async def test_input_required_reaches_an_agent_that_can_answer(tmp_path: Path) -> None:
    log = tmp_path / "received.jsonl"
    cfg = make_config(tmp_path, {"s": server("--names", "ask", "--log-file", str(log))})
    caps = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            first = await agent.result("tools/call", {"name": "mcp__s__ask", "_meta": caps})
            assert first["resultType"] == "input_required"
            assert first["inputRequests"]["login"]["method"] == "elicitation/create"
            retry = await agent.result(
                "tools/call",
                {
                    "name": "mcp__s__ask",
                    "_meta": caps,
                    "inputResponses": {"login": {"action": "accept", "content": {"name": "ada"}}},
                    "requestState": first["requestState"],
                },
            )
            assert text(retry) == "hello ada (state-\u00e9-1)"
    calls = [m for m in received(log) if m.get("method") == "tools/call"]
    assert calls[0]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {
        "elicitation": {}
    }
    assert calls[1]["params"]["requestState"] == "state-\u00e9-1"
    assert calls[0]["id"] != calls[1]["id"]


async def test_a_request_state_that_names_no_wait_is_that_request_s_error(tmp_path: Path) -> None:
    """An agent that sends mcpd's kind of requestState that names nothing waiting (made
    up, or for a wait that is over) gets an error; the daemon serves on."""
    cfg = make_config(tmp_path, {"s": server("--names", "ask,echo")})
    caps = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    forged = {
        "name": "mcp__s__echo",
        "_meta": caps,
        "inputResponses": {"mcpd_1": {"action": "accept", "content": {}}},
        "requestState": "mcpd-ask:made-up",
    }
    with trio.fail_after(30):
        async with running(cfg) as daemon:
            async with connect(daemon.socket_path) as agent:
                reply = await agent.rpc("tools/call", forged)
                assert "requestState is mcpd's and has expired" in reply["error"]["message"]
                assert text(await agent.call("mcp__s__echo", {"text": "on"})) == "echo:on"
            async with connect(daemon.socket_path) as other:
                assert text(await other.call("mcp__s__echo", {"text": "up"})) == "echo:up"


async def test_input_required_is_an_error_for_an_agent_that_cannot(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"s": server("--names", "ask")})
    with trio.fail_after(30):
        async with running(cfg) as daemon:
            async with connect(daemon.socket_path) as modern:
                result = await modern.call("mcp__s__ask")
                assert result["isError"] is True and result["resultType"] == "complete"
                assert "login" in text(result) and "GitHub user?" in text(result)
            async with connect(daemon.socket_path, modern=False) as legacy:
                await legacy.initialize()
                result = await legacy.call("mcp__s__ask")
                assert result["isError"] is True and "resultType" not in result


async def test_a_url_elicitation_reaches_only_an_agent_that_declared_url_mode(
    tmp_path: Path,
) -> None:
    sign_in = {
        "mode": "url",
        "message": "Sign in",
        "url": "https://evil.example/x",
        "elicitationId": "e1",
    }
    asks = {"k": {"method": "elicitation/create", "params": sign_in}}
    answers = tmp_path / "answers.json"
    answers.write_text(
        json.dumps(
            {
                "tools": {
                    "url": {
                        "resultType": "input_required",
                        "inputRequests": asks,
                        "requestState": "s1",
                    }
                }
            }
        )
    )
    cfg = make_config(tmp_path, {"s": {"command": sys.executable, "args": [CANNED, str(answers)]}})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            for declared in ({}, {"form": {}}, {"url": {}}):
                caps = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": declared}}
                result = await agent.result("tools/call", {"name": "mcp__s__url", "_meta": caps})
                if "url" in declared:
                    assert result["inputRequests"]["k"]["params"]["url"] == sign_in["url"]
                else:
                    assert result["isError"] is True and "inputRequests" not in result


async def test_modern_agents_subscribe_to_tool_list_changes(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"c": {"command": sys.executable, "args": [CUSTOM]}})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            listen: dict[str, Any] = {}

            async def subscribe() -> None:
                listen["end"] = await agent.rpc(
                    "subscriptions/listen",
                    {"notifications": {"toolsListChanged": True, "promptsListChanged": True}},
                    rid="L1",
                )

            async with trio.open_nursery() as nursery:
                nursery.start_soon(subscribe)
                ack = (await agent.wait_notifications(1))[0]
                assert ack["method"] == "notifications/subscriptions/acknowledged"
                assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L1"
                assert ack["params"]["notifications"] == {
                    "toolsListChanged": True,
                    "promptsListChanged": True,
                }
                # The upstream server adds a tool; mcpd hears it on its own subscription
                # to that server and tells the agent, tagged with the agent's id.
                await agent.call("mcp__c__grow", {"name": "fresh"})
                note = (await agent.wait_notifications(2))[1]
                assert note["method"] == "notifications/tools/list_changed"
                assert note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L1"
                names = [t["name"] for t in await agent.tools()]
                assert "mcp__c__fresh" in names
                daemon.stop()
            assert listen["end"]["result"]["resultType"] == "complete"
            assert listen["end"]["result"]["_meta"] == {
                "io.modelcontextprotocol/subscriptionId": "L1"
            }


@needs_root
async def test_a_disallowed_uid_is_refused_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uid = peer_uid()
    sock = shared_dir() / "mcpd.sock"

    async def as_user(method: str) -> dict[str, Any]:
        return json.loads(await run_as(uid, ONE_REQUEST, str(sock), method))  # type: ignore[no-any-return]

    cfg = make_config(tmp_path, {}, socket=str(sock), socket_mode="0666")
    with trio.fail_after(30):
        async with running(cfg):
            refused = await as_user("ping")
            assert f"uid {uid} may not use this socket" in refused["error"]["message"]
            assert "daemon.allow_uids/allow_groups" in refused["error"]["message"]
        assert any(f"uid {uid}" in r.getMessage() for r in caplog.records)
    cfg = make_config(tmp_path, {}, socket=str(sock), socket_mode="0666", allow_uids=[uid])
    with trio.fail_after(30):
        async with running(cfg):
            assert (await as_user("ping"))["result"] == {"resultType": "complete"}
            # Allowed to use the tools is not allowed to reload the daemon.
            denied = await as_user("mcpd/reload")
            assert "only for the daemon's user and root" in denied["error"]["message"]


# "graceful" is the form errata to 2026-07-28 give (the subscription id in _meta);
# "empty" the one before them.
@pytest.mark.parametrize("how", ["graceful", "empty", "cancel"])
async def test_mcpd_listens_again_when_a_server_ends_the_subscription(
    tmp_path: Path, how: str
) -> None:
    log = tmp_path / "received.jsonl"
    cfg = make_config(tmp_path, {"s": server("--listen-end", how, "--log-file", str(log))})
    with trio.fail_after(30):
        async with running(cfg):
            # Ended twice, it subscribed three times; each end also refreshed the list
            # (listed once at the start, then once an end).
            while sum(1 for m in received(log) if m.get("method") == "subscriptions/listen") < 3:
                await trio.sleep(0.05)
            while sum(1 for m in received(log) if m.get("method") == "tools/list") < 3:
                await trio.sleep(0.05)
    listens = [m for m in received(log) if m.get("method") == "subscriptions/listen"]
    assert all(m["params"]["notifications"] == {"toolsListChanged": True} for m in listens)
    assert len({m["id"] for m in listens}) == len(listens)


@needs_root
async def test_a_reload_grants_and_revokes_access_by_group(tmp_path: Path) -> None:
    uid = peer_uid()  # run_as gives the peer this number as its group id too
    sock = shared_dir() / "mcpd.sock"
    path = tmp_path / "mcpd.toml"

    def write(groups: list[str]) -> None:
        path.write_text(
            f'[daemon]\nsocket = "{sock}"\nsocket_mode = "0666"\n'
            f'state_dir = "{tmp_path / "state"}"\nallow_groups = {json.dumps(groups)}\n'
        )

    async def allowed() -> bool:
        answer = json.loads(await run_as(uid, ONE_REQUEST, str(sock), "ping"))
        return "result" in answer

    write([str(uid)])
    with trio.fail_after(30):
        async with running(load(path), config_path=str(path)) as daemon:
            assert await allowed()
            write([])
            await daemon.reload()
            assert not await allowed(), "a group taken out of allow_groups kept its access"
            write([str(uid)])
            await daemon.reload()
            assert await allowed(), "a group put into allow_groups by a reload was refused"


async def test_agents_get_each_servers_own_instructions_under_its_name(tmp_path: Path) -> None:
    cfg = make_config(
        tmp_path,
        {
            "apples": server("--instructions", "Call pick before peel."),
            "pears": server("--instructions", "Pears are soft: handle with care."),
        },
        profiles={"orchard": {"servers": ["apples"]}},
    )
    with trio.fail_after(30):
        async with running(cfg) as daemon:
            async with connect(daemon.socket_path, modern=False) as legacy:
                said = (await legacy.initialize())["instructions"]
            apples = "[mcpd] The server 'apples' says:\n> Call pick before peel.\n"
            pears = "[mcpd] The server 'pears' says:\n> Pears are soft: handle with care.\n"
            assert apples in said and pears in said
            assert said.index(apples) < said.index(pears)
            async with connect(daemon.socket_path) as modern:
                await modern.use_profile("orchard")
                found = await modern.result("server/discover")
            assert "Call pick before peel." in found["instructions"]
            assert "Pears" not in found["instructions"], "a hidden server's instructions"
