"""A modern server refusing the one listen mcpd holds there for every agent, because
it names URIs the server does not have: the listen is sent again without them, found
by halving what no acknowledged listen named, and the other agents' URIs stay named."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio
import trio.testing
from msgspec import Raw

from mcpd.config.tables.model import NamingConfig
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.lists.listened import ListenedURIs
from mcpd.servers.lists.prompt_resource_lists import PromptResourceKeeper
from mcpd.servers.lists.tool_list_keeper import ToolListKeeper
from protocol.jsonrpc import messages as rpc
from tests.support.parts.scripted_up import ScriptedUp, as_up

NOT_FOUND = rpc.RPCError(rpc.INVALID_PARAMS, "Resource not found")


def test_one_new_uri_refused_is_named_no_more_until_let_go() -> None:
    listened = ListenedURIs()
    assert listened.naming({"f://a"}) == ["f://a"]
    assert not listened.acknowledged()
    assert listened.naming({"f://a", "f://bad"}) == ["f://a", "f://bad"]
    assert listened.refusal("srv", NOT_FOUND, 1.0) == "at once"
    assert listened.refused == {"f://bad"}
    assert listened.naming({"f://a", "f://bad"}) == ["f://a"]
    listened.let_go("f://bad")
    assert listened.naming({"f://a", "f://bad"}) == ["f://a", "f://bad"]


def test_a_refusal_naming_no_new_uri_blames_none() -> None:
    listened = ListenedURIs()
    listened.naming({"f://a"})
    listened.acknowledged()
    listened.naming({"f://a"})
    assert listened.refusal("srv", NOT_FOUND, 1.0) == "backoff"
    assert listened.refused == set()
    assert listened.naming({"f://a"}) == ["f://a"]


def _settled(named: list[str], listened: ListenedURIs, bad: set[str]) -> bool:
    """A server that refuses any listen naming one of ``bad``, and takes the others:
    whether the listen it took leaves nothing to try."""
    if bad & set(named):
        listened.refusal("srv", NOT_FOUND, 1.0)
        return False
    return not listened.acknowledged()


@pytest.mark.parametrize("bad", [{"f://007"}, {"f://000", "f://031"}, {"f://010", "f://011"}])
def test_the_bad_uris_among_many_new_are_found_in_a_few_listens(bad: set[str]) -> None:
    listened = ListenedURIs()
    held = {f"f://{n:03}" for n in range(32)}
    sent = 0
    while True:
        named = listened.naming(held)
        sent += 1
        if _settled(named, listened, bad):
            break
        assert sent < 40
    assert set(named) == held - bad
    assert listened.refused == bad
    assert sent <= 2 + 2 * len(bad) * 5  # about 2·k·log2(n) listens, and the last


class Refusing(ScriptedUp):
    """A 2026-07-28 server that acknowledges a listen naming only URIs it has, and
    answers any other with -32602; while a listen is open it tells an update of each
    URI it names every tenth of a second."""

    def __init__(self, keeper: PromptResourceKeeper, has: set[str]) -> None:
        super().__init__({"resources": {"subscribe": True}}, era="modern")
        self.keeper, self.has = keeper, has

    async def listen_for(self, notifications: dict[str, Any]) -> None:
        self.listens.append(dict(notifications))
        self.listening.set()
        named = notifications.get("resourceSubscriptions", [])
        if set(named) - self.has:
            raise NOT_FOUND
        ack = json.dumps({"notifications": notifications}).encode()
        method = "notifications/subscriptions/acknowledged"
        self.keeper.on_notification(rpc.Notification(method=method, params=Raw(ack)))
        while True:
            await trio.sleep(0.1)
            for uri in named:
                updated = json.dumps({"uri": uri}).encode()
                method = "notifications/resources/updated"
                self.keeper.on_notification(rpc.Notification(method=method, params=Raw(updated)))


async def test_an_agents_bad_uri_leaves_the_others_listened_to(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    catalog = Catalog(NamingConfig())
    keeper = PromptResourceKeeper("srv", catalog, lambda: None, lambda: None)
    up = Refusing(keeper, {"f://x", "f://y"})
    lists = ToolListKeeper("srv", lambda: None, lambda: True, lambda tools: None)
    with trio.fail_after(60), caplog.at_level(logging.INFO, logger="mcpd.server"):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(keeper.listen, as_up(up), lists)
            keeper.add_subscription("f://x")
            await trio.sleep(5)
            keeper.add_subscription("f://nope")  # another agent's, the server lacks it
            await trio.sleep(5)
            assert up.listens[-1] == {"resourceSubscriptions": ["f://x"]}
            keeper.drop_subscription("f://nope")  # it leaves
            keeper.add_subscription("f://y")  # a later one is still heard
            await trio.sleep(5)
            nursery.cancel_scope.cancel()
    assert up.listens[-1] == {"resourceSubscriptions": ["f://x", "f://y"]}
    assert len(up.listens) <= 5
    assert any(
        r.getMessage() == 'srv: subscriptions/listen refused ("Resource not found"); listening'
        ' again without "f://nope"'
        for r in caplog.records
    )


async def test_an_agent_naming_a_bad_uri_again_and_again_costs_the_others_little(
    autojump_clock: trio.testing.MockClock,
) -> None:
    catalog = Catalog(NamingConfig())
    keeper = PromptResourceKeeper("srv", catalog, lambda: None, lambda: None)
    up = Refusing(keeper, {"f://x"})
    heard: list[str] = []
    keeper.on_updated = lambda alias, uri: heard.append(uri)
    lists = ToolListKeeper("srv", lambda: None, lambda: True, lambda tools: None)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(keeper.listen, as_up(up), lists)
            keeper.add_subscription("f://x")
            await trio.sleep(1)
            before = len(heard)
            for _ in range(30):  # subscribed, refused, let go, subscribed again ...
                keeper.add_subscription("f://nope")
                await trio.sleep(1)
                keeper.drop_subscription("f://nope")
                await trio.sleep(1)
            nursery.cancel_scope.cancel()
    # Ten updates a second while a listen names f://x: 60 s would tell 600.
    assert len(heard) - before > 500
