"""A profile's agents hear of their own tool list's changes only, in a running daemon:
not when a server the profile does not show, or a tool it filters out, changes, even
where the naming gives a tool of theirs the name of one that changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.loading.load import parse_config
from tests.support.clients.agent import META, Agent, connect, running
from tests.support.daemons.pins import TOOLS_CHANGED, Changing, heard

SCHEMA = {"type": "object"}


def tools(*names: str) -> dict[str, Any]:
    return {"tools": [{"name": n, "description": f"{n}.", "inputSchema": SCHEMA} for n in names]}


def server(tmp_path: Path, name: str, *names: str) -> Changing:
    home = tmp_path / name
    home.mkdir()
    changing = Changing(home)
    changing.write(tools(*names))
    return changing


async def listening(agent: Agent) -> None:
    """A modern agent's listen for tool list changes, acknowledged."""
    params = {"notifications": {"toolsListChanged": True}, "_meta": META}
    message = {"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen", "params": params}
    await agent.send_raw(json.dumps(message).encode() + b"\n")
    await agent.wait_notifications(1)


def names(listed: list[dict[str, Any]]) -> list[str]:
    return [t["name"] for t in listed]


def named(listed: list[dict[str, Any]], alias: str, original: str) -> str:
    return next(
        t["name"]
        for t in listed
        if t["_meta"]["mcpd/server"] == alias and t["_meta"]["mcpd/originalName"] == original
    )


@pytest.mark.parametrize(
    ("narrow", "profile_template"),
    [
        ({"servers": ["a"]}, None),
        ({"servers": ["a"]}, "{alias}__{tool}"),
        # b is shown, but not the tool it adds, nor any of its tools but `own`.
        ({"tools": {"allow": ["a/*", "b/own"]}}, None),
    ],
)
async def test_a_change_the_profile_does_not_show_is_no_news_to_its_agents(
    tmp_path: Path, narrow: dict[str, Any], profile_template: str | None
) -> None:
    a = server(tmp_path, "a", "shared", "own_a")
    b = server(tmp_path, "b", "shared", "own")
    if profile_template is not None:
        narrow = {**narrow, "template": profile_template}
    config = parse_config(
        {
            "daemon": {
                "socket": str(tmp_path / "mcpd.sock"),
                "state_dir": str(tmp_path / "state"),
                "startup_deadline": 20.0,
            },
            # Without the alias in it, a's and b's `shared` and `relist` share a name.
            "naming": {"template": "{tool}"},
            "servers": {"a": a.config(), "b": b.config()},
            "profiles": {"narrow": narrow},
        }
    )
    with trio.fail_after(60):
        async with (
            running(config) as daemon,
            connect(daemon.socket_path, modern=False) as owner,
            connect(daemon.socket_path, modern=False) as legacy,
            connect(daemon.socket_path) as modern,
        ):
            for agent in (owner, legacy):
                await agent.initialize()
            for agent in (legacy, modern):
                await agent.use_profile("narrow")
            await listening(modern)
            before = names(await legacy.tools())
            assert names(await modern.tools()) == before
            everything = await owner.tools()
            b.write(tools("shared", "own", "grown"))
            since = len(owner.notifications)
            called = await owner.call(named(everything, "b", "relist"))
            assert called["content"][0]["text"] == "announced"
            await heard(owner, since, (TOOLS_CHANGED,))
            assert "grown" in names(await owner.tools())
            # The news goes to every agent in one pass: a reply after it is later still.
            for agent in (legacy, modern):
                await agent.result("ping")
            assert [n["method"] for n in legacy.notifications] == []
            assert [n["method"] for n in modern.notifications] == [
                "notifications/subscriptions/acknowledged"
            ]
            assert names(await legacy.tools()) == before
