"""@modelcontextprotocol/server-everything (the TS SDK's reference server, legacy only)
behind mcpd: its prompts, resources, templates, completions, subscriptions, and the
tools that ask the client for elicitation, sampling and roots, for a legacy agent
and (through mcpd's own input_required rounds) for a modern one."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import META, make_config, running
from tests.support.clients.answering import AnsweringAgent, connect_answering
from tests.support.hosts.peers import node_env, node_tool

CAPS = {"elicitation": {}, "sampling": {}, "roots": {"listChanged": True}}
EV = "mcp__everything__"


def answer(method: str, params: Any) -> Any:
    if method == "elicitation/create":
        return {"action": "accept", "content": {"name": "Ada Lovelace", "check": True}}
    if method == "sampling/createMessage":
        text = params["messages"][0]["content"]["text"]
        return {
            "role": "assistant",
            "content": {"type": "text", "text": f"sampled: {text}"},
            "model": "test-model",
            "stopReason": "endTurn",
        }
    if method == "roots/list":
        return {"roots": [{"uri": "file:///work/project", "name": "project"}]}
    raise AssertionError(method)


async def call(agent: AnsweringAgent, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A tools/call; a modern agent answers mcpd's input_required rounds itself."""
    params: dict[str, Any] = {"name": EV + name, "arguments": args}
    if agent.modern:
        params["_meta"] = {**META, "io.modelcontextprotocol/clientCapabilities": CAPS}
    for _ in range(4):
        result: dict[str, Any] = await agent.result("tools/call", params)
        if result.get("resultType") != "input_required":
            return result
        answers = {
            k: answer(r["method"], r.get("params")) for k, r in result["inputRequests"].items()
        }
        params = {**params, "inputResponses": answers, "requestState": result["requestState"]}
    raise AssertionError("no end to the rounds")


def text(result: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


@pytest.mark.parametrize("agent_era", ["legacy", "modern"])
async def test_everything_servers_whole_surface_through_mcpd(
    tmp_path: Path, agent_era: str
) -> None:
    server = {"command": node_tool("mcp-server-everything"), "args": ["stdio"], "env": node_env()}
    cfg = make_config(tmp_path, {"everything": server})
    modern = agent_era == "modern"
    with trio.fail_after(120):
        async with running(cfg) as daemon:
            async with connect_answering(daemon.socket_path, modern, answer) as agent:
                if not modern:
                    await agent.initialize_with(CAPS)
                prompts = (await agent.result("prompts/list"))["prompts"]
                assert sorted(p["name"] for p in prompts) == [
                    EV + n
                    for n in (
                        "args-prompt",
                        "completable-prompt",
                        "resource-prompt",
                        "simple-prompt",
                    )
                ]
                got = await agent.result(
                    "prompts/get", {"name": EV + "args-prompt", "arguments": {"city": "Paris"}}
                )
                assert "Paris" in got["messages"][0]["content"]["text"]
                embedding = await agent.result(
                    "prompts/get",
                    {
                        "name": EV + "resource-prompt",
                        "arguments": {"resourceType": "Text", "resourceId": "2"},
                    },
                )
                embedded = embedding["messages"][1]["content"]["resource"]
                assert embedded["uri"] == "demo://resource/dynamic/text/2"
                reread = await agent.result("resources/read", {"uri": embedded["uri"]})
                assert reread["contents"][0]["text"].startswith("Resource 2:")

                resources = (await agent.result("resources/list"))["resources"]
                assert len(resources) == 7
                doc = resources[0]
                assert doc["_meta"]["mcpd/server"] == "everything"
                assert doc["description"].startswith("[everything] ")
                read = await agent.result("resources/read", {"uri": doc["uri"]})
                assert read["contents"][0]["mimeType"] == "text/markdown"
                templates = (await agent.result("resources/templates/list"))["resourceTemplates"]
                assert sorted(t["uriTemplate"] for t in templates) == [
                    "demo://resource/dynamic/blob/{resourceId}",
                    "demo://resource/dynamic/text/{resourceId}",
                ]
                blob = await agent.result(
                    "resources/read", {"uri": "demo://resource/dynamic/blob/1"}
                )
                assert base64.b64decode(blob["contents"][0]["blob"])  # passed through as sent

                done = await agent.result(
                    "completion/complete",
                    {
                        "ref": {"type": "ref/prompt", "name": EV + "completable-prompt"},
                        "argument": {"name": "department", "value": "E"},
                    },
                )
                assert done["completion"]["values"] == ["Engineering"]

                links = await call(agent, "get-resource-links", {"count": 2})
                for link in [b for b in links["content"] if b["type"] == "resource_link"]:
                    again = await agent.result("resources/read", {"uri": link["uri"]})
                    assert again["contents"][0]["uri"] == link["uri"]

                elicited = await call(agent, "trigger-elicitation-request", {})
                assert "Ada Lovelace" in text(elicited)
                sampled = await call(
                    agent, "trigger-sampling-request", {"prompt": "hi", "maxTokens": 5}
                )
                assert "sampled: Resource trigger-sampling-request context: hi" in text(sampled)
                roots = await call(agent, "get-roots-list", {})
                assert "file:///work/project" in text(roots)
                if modern:
                    assert agent.asked == []  # a modern agent got input_required instead
                else:
                    methods = {m["method"] for m in agent.asked}
                    assert methods == {"elicitation/create", "sampling/createMessage", "roots/list"}
            daemon.stop()


async def test_everything_servers_resource_updates_reach_the_subscriber(tmp_path: Path) -> None:
    server = {"command": node_tool("mcp-server-everything"), "args": ["stdio"], "env": node_env()}
    cfg = make_config(tmp_path, {"everything": server})
    uri = "demo://resource/static/document/features.md"
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            async with connect_answering(daemon.socket_path, False, answer) as agent:
                await agent.initialize_with({})
                assert await agent.result("resources/subscribe", {"uri": uri}) == {}
                runner = daemon.supervisor.servers["everything"]
                while uri not in runner.prompt_resources.held:  # the server has the subscription
                    await trio.sleep(0.02)
                # The tool starts the server's simulated updates (the first one at once).
                await agent.call(EV + "toggle-subscriber-updates", {})
                while not any(
                    n["method"] == "notifications/resources/updated" for n in agent.notifications
                ):
                    agent.notified = trio.Event()
                    await agent.notified.wait()
                updated = [
                    n
                    for n in agent.notifications
                    if n["method"] == "notifications/resources/updated"
                ]
                assert updated[0]["params"] == {"uri": uri}
                assert await agent.result("resources/unsubscribe", {"uri": uri}) == {}
                while uri in runner.prompt_resources.held:  # the server let go of it too
                    await trio.sleep(0.02)
            daemon.stop()
