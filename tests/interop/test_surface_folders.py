"""Two instances of an official-SDK server over two folders, listing the same URIs:
both readable through mcpd, in every pairing of eras, with the URIs inside tool
results and prompt messages readable too, and resource updates reaching exactly the
agents that subscribed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import META, Agent, connect, make_config, running, two_agents

FOLDER = str(Path(__file__).with_name("servers") / "folder_server.py")
README = "file:///README.md"


def folders(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for alias in ("a", "b"):
        folder = tmp_path / f"folder-{alias}"
        folder.mkdir()
        (folder / "README.md").write_text(f"readme of {alias}\n")
        out[alias] = folder
    (out["a"] / "notes.txt").write_text("only in a\n")
    return out


def config(tmp_path: Path, era: str) -> Any:
    servers = {
        alias: {"command": sys.executable, "args": [FOLDER, str(folder), "stdio"], "era": era}
        for alias, folder in folders(tmp_path).items()
    }
    return make_config(tmp_path, servers)


async def texts(agent: Agent, uri: str) -> list[str]:
    result = await agent.result("resources/read", {"uri": uri})
    return [c["text"] for c in result["contents"]]


@pytest.mark.parametrize("server_era", ["legacy", "modern"])
@pytest.mark.parametrize("agent_era", ["legacy", "modern"])
async def test_the_same_uri_of_two_servers_is_readable_from_each(
    tmp_path: Path, server_era: str, agent_era: str
) -> None:
    modern = agent_era == "modern"
    with trio.fail_after(90):
        async with running(config(tmp_path, server_era)) as daemon:
            async with connect(daemon.socket_path, modern) as agent:
                if not modern:
                    await agent.initialize()
                listed = (await agent.result("resources/list"))["resources"]
                uris = sorted(r["uri"] for r in listed)
                assert uris == ["file:///notes.txt", "mcpd://a/" + README, "mcpd://b/" + README]
                assert await texts(agent, "mcpd://a/" + README) == ["readme of a\n"]
                assert await texts(agent, "mcpd://b/" + README) == ["readme of b\n"]
                assert await texts(agent, "file:///notes.txt") == ["only in a\n"]
                # The plain URI names two resources: the agent is told which it can read.
                plain = await agent.rpc("resources/read", {"uri": README})
                assert plain["error"]["code"] == -32602
                assert plain["error"]["data"]["candidates"] == [
                    "mcpd://a/" + README,
                    "mcpd://b/" + README,
                ]
                # Both servers' template is the same: both are handed over rewritten, and
                # an expansion of each reaches its server.
                templates = (await agent.result("resources/templates/list"))["resourceTemplates"]
                assert sorted(t["uriTemplate"] for t in templates) == [
                    "mcpd://a/file:///{name}",
                    "mcpd://b/file:///{name}",
                ]
                assert await texts(agent, "mcpd://a/file:///notes.txt") == ["only in a\n"]
                done = await agent.result(
                    "completion/complete",
                    {
                        "ref": {"type": "ref/resource", "uri": "mcpd://a/file:///{name}"},
                        "argument": {"name": "name", "value": "n"},
                    },
                )
                assert done["completion"]["values"] == ["notes.txt"]

                # What a tool hands over can be read back, from the right server.
                shown = await agent.call("mcp__b__show", {"name": "README.md"})
                link, embedded = shown["content"]
                assert link["uri"] == embedded["resource"]["uri"] == "mcpd://b/" + README
                assert await texts(agent, link["uri"]) == ["readme of b\n"]
                # And so can what a prompt embeds.
                prompt = await agent.result(
                    "prompts/get", {"name": "mcp__a__review", "arguments": {"name": "README.md"}}
                )
                inner = prompt["messages"][1]["content"]["resource"]
                assert inner["uri"] == "mcpd://a/" + README
                assert inner["text"] == "readme of a\n"
                names = await agent.result(
                    "completion/complete",
                    {
                        "ref": {"type": "ref/prompt", "name": "mcp__a__review"},
                        "argument": {"name": "name", "value": "R"},
                    },
                )
                assert names["completion"]["values"] == ["README.md"]
            daemon.stop()


async def wait_for(agent: Agent, method: str) -> dict[str, Any]:
    while True:
        for note in agent.notifications:
            if note["method"] == method:
                return note
        agent.notified = trio.Event()
        await agent.notified.wait()


@pytest.mark.parametrize("server_era", ["legacy", "modern"])
@pytest.mark.parametrize("agent_era", ["legacy", "modern"])
async def test_resource_updates_reach_exactly_the_agents_that_subscribed(
    tmp_path: Path, server_era: str, agent_era: str
) -> None:
    modern = agent_era == "modern"
    watched = "mcpd://a/" + README
    with trio.fail_after(90):
        async with running(config(tmp_path, server_era)) as daemon:
            async with (
                connect(daemon.socket_path, modern) as subscriber,
                connect(daemon.socket_path, modern) as bystander,
                trio.open_nursery() as nursery,
            ):
                if modern:

                    async def listen() -> None:
                        params = {
                            "notifications": {"resourceSubscriptions": [watched, "nope://x"]},
                            "_meta": META,
                        }
                        await subscriber.rpc("subscriptions/listen", params, rid="L1")

                    nursery.start_soon(listen)
                    ack = await wait_for(subscriber, "notifications/subscriptions/acknowledged")
                    # Only what mcpd can hold is acknowledged: no server has nope://x.
                    assert ack["params"]["notifications"] == {"resourceSubscriptions": [watched]}
                else:
                    await subscriber.initialize()
                    await bystander.initialize()
                    assert await subscriber.result("resources/subscribe", {"uri": watched}) == {}
                # The subscription reaches the server; then a change to the file is news.
                runner = daemon.supervisor.servers["a"]
                while README not in runner.prompt_resources.subscribed:
                    await trio.sleep(0.02)
                if server_era == "modern":
                    # Its listen names the URI once the server acknowledges it so.
                    keeper = runner.prompt_resources
                    while README not in keeper.acknowledged.get("resourceSubscriptions", []):
                        await trio.sleep(0.02)
                else:
                    while README not in runner.prompt_resources.held:
                        await trio.sleep(0.02)
                await bystander.call("mcp__a__touch", {"name": "README.md", "text": "changed\n"})
                note = await wait_for(subscriber, "notifications/resources/updated")
                assert note["params"]["uri"] == watched
                if modern:
                    assert note["params"]["_meta"] == {
                        "io.modelcontextprotocol/subscriptionId": "L1"
                    }
                await bystander.tools()  # anything sent to it before this reply has arrived
                assert [
                    n
                    for n in bystander.notifications
                    if n["method"].startswith("notifications/res")
                ] == []
                assert await texts(subscriber, watched) == ["changed\n"]
                nursery.cancel_scope.cancel()
            daemon.stop()


async def test_a_profile_sees_only_the_prompts_and_resources_it_admits(tmp_path: Path) -> None:
    base = config(tmp_path, "auto")
    profiles = {
        "a_only": {"servers": ["a"]},
        "no_readme": {"resources": {"deny": ["*README*"]}, "prompts": {"deny": ["b/*"]}},
    }
    cfg = make_config(tmp_path, _servers(base), profiles=profiles)
    with trio.fail_after(60):
        async with two_agents(cfg) as (daemon, a_only, no_readme):
            await a_only.use_profile("a_only")
            await no_readme.use_profile("no_readme")
            # b, which a_only does not show, lists the same README: for a_only it does
            # not exist, so a's README is a's alone, handed over and read as a wrote it.
            uris = [r["uri"] for r in (await a_only.result("resources/list"))["resources"]]
            assert sorted(uris) == [README, "file:///notes.txt"]
            assert await texts(a_only, README) == ["readme of a\n"]
            listed = await a_only.result("resources/templates/list")
            assert [t["uriTemplate"] for t in listed["resourceTemplates"]] == ["file:///{name}"]
            prompts = [p["name"] for p in (await a_only.result("prompts/list"))["prompts"]]
            assert prompts == ["mcp__a__review"]
            hidden = await a_only.rpc("resources/read", {"uri": "mcpd://b/" + README})
            assert hidden["error"]["code"] == -32602
            assert (await a_only.rpc("prompts/get", {"name": "mcp__b__review"}))["error"]
            uris = [r["uri"] for r in (await no_readme.result("resources/list"))["resources"]]
            assert uris == ["file:///notes.txt"]
            prompts = [p["name"] for p in (await no_readme.result("prompts/list"))["prompts"]]
            assert prompts == ["mcp__a__review"]
            assert await texts(no_readme, "file:///notes.txt") == ["only in a\n"]
            denied = await no_readme.rpc("resources/read", {"uri": "mcpd://a/" + README})
            assert denied["error"]["code"] == -32602
            daemon.stop()


def _servers(cfg: Any) -> dict[str, Any]:
    return {
        alias: {"command": s.command, "args": list(s.args), "era": s.era}
        for alias, s in cfg.servers.items()
    }
