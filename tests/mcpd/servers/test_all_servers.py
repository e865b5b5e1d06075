"""Every configured server seen as one by the agent side, with runners that are built
but never run: a call to a server removed meanwhile is told so, states and outages
name who is down, a tool name of a down or disabled server says why it cannot be
called, and what agents hold (resource subscriptions, log levels) reaches each
server's runner once, also a runner started again."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Config
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.all_servers import AllServers
from mcpd.servers.calling.calls import CallRefused
from mcpd.servers.life.server_parts import ServerParts
from mcpd.servers.supervisor import Supervisor
from protocol.jsonrpc import messages as rpc
from protocol.mcp import features
from tests.support.parts.calls import a_call


def config(servers: dict[str, dict[str, Any]], **naming: Any) -> Config:
    return parse_config({"naming": naming, "servers": servers}, env={})


class World:
    """A supervisor whose servers' parts are built (for the enabled ones) but not run."""

    def __init__(self, servers: dict[str, dict[str, Any]], **naming: Any) -> None:
        self.config = config(servers, **naming)
        self.catalog = Catalog(self.config.naming)
        self.supervisor = Supervisor(self.config, self.catalog)
        for alias, cfg in self.config.servers.items():
            if cfg.enabled:
                self.add(alias)
        self.all = AllServers(self.supervisor, self.catalog)

    def add(self, alias: str) -> ServerParts:
        """The parts of ``alias``, as a (re)start puts them in place."""
        cfg = self.config.servers[alias]
        server = ServerParts(alias, cfg, self.config, self.catalog, lambda a: None)
        self.supervisor.servers[alias] = server
        return server

    def server(self, alias: str) -> ServerParts:
        return self.supervisor.servers[alias]

    def up(self, *aliases: str) -> None:
        for alias in aliases:
            self.server(alias).downtime.set_phase("connected")

    def down(self, alias: str, reason: str = "its secret file is missing") -> None:
        self.server(alias).downtime.cannot_start(reason)


def cmd(**more: Any) -> dict[str, Any]:
    return {"command": "srv", **more}


# -- calls and requests --


async def test_a_call_to_a_server_removed_meanwhile_gets_an_outage_not_a_hang() -> None:
    world = World({"a": cmd()})
    call, outcomes = a_call("t")
    call.alias = "gone"
    world.all.start(call)
    with pytest.raises(CallRefused) as refused:
        await outcomes.result(call)
    assert refused.value.outage.server == "gone"
    assert "removed from the configuration" in refused.value.outage.sentence()


async def test_a_call_to_a_configured_server_goes_to_its_scheduler() -> None:
    world = World({"a": cmd(), "b": cmd()})
    call, outcomes = a_call("t")
    call.alias = "b"
    world.all.start(call)
    # Its server is starting for the first time: the call waits for it, at b only.
    assert world.server("b").waiting == 1 and world.server("a").waiting == 0
    assert not outcomes.arrived.is_set()


async def test_a_request_to_a_server_removed_meanwhile_is_refused_with_its_name() -> None:
    world = World({"a": cmd()})
    params = features.ReadResourceParams(uri="x://y")
    with pytest.raises(CallRefused) as refused:
        await world.all.request("gone", "resources/read", params)
    assert refused.value.outage.server == "gone"


# -- states and outages --


async def test_states_are_sorted_and_only_a_down_server_carries_why_and_since() -> None:
    world = World({"zed": cmd(), "alpha": cmd()})
    world.up("zed")
    world.down("alpha")
    states = world.all.states()
    assert [s.server for s in states] == ["alpha", "zed"]
    alpha, zed = states
    assert msgspec.json.encode(zed) == b'{"server":"zed","state":"ready","available":true}'
    assert alpha.state == "unresolved" and alpha.available is False
    assert alpha.reason == "its secret file is missing"
    assert isinstance(alpha.since, str) and alpha.retry_at is None


async def test_outages_name_only_the_down_servers_an_agent_may_see() -> None:
    world = World({"a": cmd(), "b": cmd(), "c": cmd()})
    world.up("a")
    world.down("b", "no token")
    world.down("c", "no key")
    (everyone_b, everyone_c) = world.all.outages()
    assert "'b'" in everyone_b and "'c'" in everyone_c
    (only_c,) = world.all.outages(only=lambda alias: alias != "b")
    assert "'c'" in only_c and "no key" in only_c
    assert world.all.outages(only=lambda alias: alias == "a") == []


# -- why a tool name cannot be called --


async def test_a_tool_of_a_down_server_is_said_to_be_down_with_its_reason() -> None:
    world = World({"notes": cmd()})
    world.down("notes", "NOTES_TOKEN is not set")
    said = world.all.down_for("mcp__notes__search")
    assert said is not None
    assert "'notes'" in said and "NOTES_TOKEN is not set" in said
    assert said.endswith("Its tools are listed again when it is back.")


async def test_a_tool_of_an_available_or_unknown_server_is_not_said_to_be_down() -> None:
    world = World({"notes": cmd()})
    world.up("notes")
    assert world.all.down_for("mcp__notes__search") is None
    assert world.all.down_for("mcp__other__search") is None
    assert world.all.down_for("search") is None


async def test_the_longest_alias_prefix_decides_which_down_server_is_meant() -> None:
    world = World({"a": cmd(), "a_b": cmd()})
    world.down("a", "a's reason")
    world.down("a_b", "a_b's reason")
    # "mcp__a_" is a prefix of "mcp__a_b__", so both match; the longer is the server.
    said = world.all.down_for("mcp__a_b__x")
    assert said is not None and "a_b's reason" in said
    said = world.all.down_for("mcp__a__x")
    assert said is not None and "a's reason" in said


async def test_a_down_server_an_agent_may_not_see_is_not_named_to_it() -> None:
    world = World({"secret": cmd()})
    world.down("secret")
    assert world.all.down_for("mcp__secret__t", only=lambda alias: alias != "secret") is None


async def test_a_tool_of_a_disabled_server_says_how_to_enable_it() -> None:
    world = World({"off": cmd(enabled=False)})
    said = world.all.down_for("mcp__off__t")
    assert said is not None and "'off' is disabled" in said and "enabled = false" in said


async def test_a_server_being_added_by_a_reload_is_not_said_to_be_down() -> None:
    world = World({"new": cmd()})
    del world.supervisor.servers["new"]  # in the config, its runner not yet started
    assert world.all.down_for("mcp__new__t") is None


async def test_down_for_follows_the_naming_template_it_is_given() -> None:
    world = World({"notes": cmd()}, template="x_{alias}_{tool}")
    world.down("notes")
    assert world.all.down_for("x_notes_search") is not None
    assert world.all.down_for("mcp__notes__search") is None
    assert world.all.down_for("mcp__notes__search", template="mcp__{alias}__{tool}") is not None


# -- what agents hold, reaching the runners --


async def test_a_subscription_held_and_let_go_leaves_the_server_unsubscribed() -> None:
    world = World({"a": cmd()})
    runner = world.server("a")
    world.all.subscribe_resource("a", "file:///x", True)
    assert runner.prompt_resources.subscribed == {"file:///x": 1}
    world.all.subscribe_resource("a", "file:///x", True)
    assert runner.prompt_resources.subscribed == {"file:///x": 2}
    world.all.subscribe_resource("a", "file:///x", False)
    world.all.subscribe_resource("a", "file:///x", False)
    assert runner.prompt_resources.subscribed == {}


async def test_a_runner_started_again_gets_back_every_subscription_agents_hold() -> None:
    world = World({"a": cmd(), "b": cmd()})
    world.all.changed()
    world.all.subscribe_resource("a", "file:///x", True)
    world.all.subscribe_resource("a", "file:///x", True)
    world.all.subscribe_resource("a", "file:///y", True)
    world.all.subscribe_resource("b", "file:///z", True)
    again = world.add("a")
    world.all.changed()
    assert again.prompt_resources.subscribed == {"file:///x": 2, "file:///y": 1}
    # And letting go of them there drops them upstream.
    for uri in ("file:///x", "file:///x", "file:///y"):
        world.all.subscribe_resource("a", uri, False)
    assert again.prompt_resources.subscribed == {}
    assert world.server("b").prompt_resources.subscribed == {"file:///z": 1}


async def test_a_subscription_to_a_server_without_a_runner_is_kept_for_its_start() -> None:
    world = World({"a": cmd()})
    del world.supervisor.servers["a"]
    world.all.subscribe_resource("a", "file:///x", True)
    runner = world.add("a")
    world.all.changed()
    assert runner.prompt_resources.subscribed == {"file:///x": 1}


async def test_tasks_are_watched_at_their_server_only() -> None:
    world = World({"a": cmd(), "b": cmd()})
    world.all.watch_task("a", "task-1", True)
    world.all.watch_task("gone", "task-2", True)
    assert world.server("a").prompt_resources.watched_tasks == {"task-1"}
    assert world.server("b").prompt_resources.watched_tasks == set()
    world.all.watch_task("a", "task-1", False)
    assert world.server("a").prompt_resources.watched_tasks == set()


async def test_log_levels_reach_each_runner_and_a_runner_started_again() -> None:
    world = World({"a": cmd(), "b": cmd()})
    world.all.want_logs(lambda alias: "debug" if alias == "a" else None)
    assert world.server("a").logs.wanted == "debug"
    assert world.server("b").logs.wanted is None
    again = world.add("a")
    world.all.changed()
    assert again.logs.wanted == "debug"


async def test_a_servers_log_message_reaches_every_listener_with_its_alias() -> None:
    world = World({"a": cmd()})
    heard: list[tuple[str, str]] = []
    world.all.on_log_message(lambda alias, m: heard.append((alias, m.level)))
    world.all.want_logs(lambda alias: "info")
    params = {"level": "error", "data": "boom"}
    world.server("a").logs.on_notification(
        rpc.Notification("notifications/message", msgspec.Raw(json.dumps(params).encode()))
    )
    assert heard == [("a", "error")]


async def test_news_of_a_resource_reaches_every_listener() -> None:
    world = World({"a": cmd()})
    got: list[tuple[str, str]] = []
    world.all.on_resource_updated(lambda alias, uri: got.append((alias, uri)))
    world.all.on_resource_updated(lambda alias, uri: got.append((alias, uri + "!")))
    world.all.changed()
    on_updated = world.server("a").prompt_resources.on_updated
    assert on_updated is not None
    on_updated("a", "file:///x")
    assert got == [("a", "file:///x"), ("a", "file:///x!")]


async def test_listeners_are_told_of_every_change() -> None:
    world = World({"a": cmd()})
    told: list[int] = []
    world.all.subscribe(lambda: told.append(1))
    world.all.changed()
    world.all.changed()
    assert told == [1, 1]


async def test_a_server_never_connected_says_nothing_of_itself() -> None:
    world = World({"a": cmd()})
    assert world.all.instructions() == []
    assert not world.all.subscribable("a") and not world.all.subscribable("gone")
