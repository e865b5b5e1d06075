"""One server's prompts, resources and templates as the keeper fetches and tends them,
against an upstream that answers from a script: what a fetch keeps, a server's
notifications, subscriptions held once per URI whatever the number of agents (the pages
of one list are ``list_pages``'s)."""

from __future__ import annotations

import json
import logging
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from msgspec import Raw

from mcpd.config.tables.model import NamingConfig
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.connected.answer_wait import AnswerWait, RanOut
from mcpd.servers.lists.prompt_resource_lists import (
    MIN_REFETCH,
    MIN_RESUBSCRIBE,
    PromptResourceKeeper,
)
from mcpd.servers.lists.tool_list_keeper import ToolListKeeper
from protocol.jsonrpc import messages as rpc
from protocol.mcp import features
from tests.support.parts.scripted_up import Never, ScriptedUp, as_up
from tests.support.reading.peak import peak_bytes, size
from transports.errors import TransportClosed


def notification(method: str, params: Any = None) -> rpc.Notification:
    raw = None if params is None else Raw(json.dumps(params).encode())
    return rpc.Notification(method=method, params=raw)


class Keeper:
    def __init__(self, answers: AnswerWait | None = None) -> None:
        self.catalog = Catalog(NamingConfig())
        self.wakes = 0
        self.changes = 0
        self.keeper = PromptResourceKeeper("srv", self.catalog, self._wake, self._changed, answers)

    def _wake(self) -> None:
        self.wakes += 1

    def _changed(self) -> None:
        self.changes += 1


# -- fetching --


async def test_only_the_lists_the_server_offers_are_asked_for() -> None:
    k = Keeper()
    up = ScriptedUp({"tools": {}, "prompts": True, "resources": None})
    await k.keeper.fetch(as_up(up))
    assert up.sent == []
    assert k.catalog.prompts.raw("srv") is None


async def test_fetched_lists_go_into_the_catalog_and_a_second_same_fetch_changes_nothing() -> None:
    k = Keeper()
    up = ScriptedUp({"prompts": {}, "resources": {}})
    up.answers["prompts/list"] = {"prompts": [{"name": "p"}]}
    up.answers["resources/list"] = {"resources": [{"uri": "f://a"}]}
    up.answers["resources/templates/list"] = {"resourceTemplates": [{"uriTemplate": "f://{x}"}]}
    await k.keeper.fetch(as_up(up))
    assert [p.name for p in k.catalog.prompts.raw("srv") or []] == ["p"]
    assert k.catalog.prompts.count("srv") == 1
    assert k.changes == 2
    assert set(k.keeper.trimmed) == {"prompts", "resources", "resource_templates"}
    await k.keeper.fetch(as_up(up))
    assert k.changes == 2


async def test_a_server_refusing_templates_still_gets_its_resources_listed() -> None:
    k = Keeper()
    up = ScriptedUp({"resources": {}})
    up.answers["resources/list"] = {"resources": [{"uri": "f://a"}]}
    up.answers["resources/templates/list"] = rpc.RPCError(-32601, "Method not found")
    await k.keeper.fetch(as_up(up))
    assert k.changes == 1
    assert k.keeper.trimmed["resource_templates"].dropped == []


async def test_a_failed_fetch_keeps_the_old_list_and_forgets_what_it_left_out() -> None:
    k = Keeper()
    up = ScriptedUp({"prompts": {}})
    up.answers["prompts/list"] = {"prompts": [{"name": "p"}, {"name": 1}]}
    await k.keeper.fetch(as_up(up))
    assert len(k.keeper.trimmed["prompts"].dropped) == 1
    up.answers["prompts/list"] = TransportClosed("gone")
    with pytest.raises(TransportClosed):
        await k.keeper.fetch(as_up(up))
    assert [p.name for p in k.catalog.prompts.raw("srv") or []] == ["p"]
    assert "prompts" not in k.keeper.trimmed


# -- notifications --


async def test_a_list_changed_is_fetched_again_no_sooner_than_a_second_after_the_last(
    autojump_clock: trio.testing.MockClock,
) -> None:
    k = Keeper()
    up = ScriptedUp({"prompts": {"listChanged": True}, "resources": {"listChanged": True}})
    up.answers["prompts/list"] = {"prompts": []}
    up.answers["resources/list"] = {"resources": []}
    up.answers["resources/templates/list"] = {"resourceTemplates": []}
    await k.keeper.fetch(as_up(up))
    start = trio.current_time()
    k.keeper.on_notification(notification("notifications/prompts/list_changed"))
    assert k.wakes == 1 and k.keeper.prompts_due
    assert not k.keeper.due
    assert k.keeper.waits_until() == pytest.approx(start + MIN_REFETCH)
    await trio.sleep_until(k.keeper.waits_until())
    assert k.keeper.due
    up.sent.clear()
    await k.keeper.tend(as_up(up))
    assert up.methods() == ["prompts/list"]
    assert not k.keeper.due and k.keeper.waits_until() == float("inf")


@pytest.mark.parametrize("method", ["prompts/list", "resources/list", "resources/templates/list"])
async def test_a_list_asked_for_again_and_not_answered_in_time_keeps_the_one_before(
    autojump_clock: trio.testing.MockClock, method: str
) -> None:
    """The request runs out of time; the list fetched before is served (what it left
    out forgotten, as after any fetch that failed); the next change announced asks
    again, no sooner than after any fetch."""
    k = Keeper(AnswerWait("srv", lambda: 2.0))
    up = ScriptedUp({"prompts": {"listChanged": True}, "resources": {"listChanged": True}})
    up.answers["prompts/list"] = {"prompts": [{"name": "p"}]}
    up.answers["resources/list"] = {"resources": [{"uri": "f://a", "name": "a"}]}
    up.answers["resources/templates/list"] = {
        "resourceTemplates": [{"uriTemplate": "f://{x}", "name": "t"}]
    }
    await k.keeper.fetch(as_up(up))
    shown = (k.catalog.prompts.count("srv"), k.catalog.resources.count("srv"))
    answered = up.answers[method]
    up.answers[method] = Never()
    kind = "prompts" if method == "prompts/list" else "resources"
    k.keeper.on_notification(notification(f"notifications/{kind}/list_changed"))
    await trio.sleep_until(k.keeper.waits_until())
    with pytest.raises(RanOut, match=f"{method} got no answer within 2 s"):
        await k.keeper.tend(as_up(up))
    assert (k.catalog.prompts.count("srv"), k.catalog.resources.count("srv")) == shown
    assert not k.keeper.due and k.keeper.waits_until() == float("inf")
    up.answers[method] = answered
    ran_out = trio.current_time()
    k.keeper.on_notification(notification(f"notifications/{kind}/list_changed"))
    assert k.keeper.waits_until() == pytest.approx(ran_out + MIN_REFETCH)


@pytest.mark.parametrize(
    "params", [None, [1], "f://a", 5, {"uri": 5}, {"uri": None}, {"other": "f://a"}]
)
async def test_a_resource_update_without_a_string_uri_is_ignored(params: Any) -> None:
    k = Keeper()
    heard: list[tuple[str, str]] = []
    k.keeper.on_updated = lambda alias, uri: heard.append((alias, uri))
    k.keeper.on_notification(notification("notifications/resources/updated", params))
    assert heard == []
    k.keeper.on_notification(notification("notifications/resources/updated", {"uri": "f://a"}))
    assert heard == [("srv", "f://a")]


async def test_an_acknowledgement_that_is_not_an_object_honours_nothing() -> None:
    k = Keeper()
    ack = "notifications/subscriptions/acknowledged"
    k.keeper.on_notification(notification(ack, {"notifications": {"resourceSubscriptions": []}}))
    assert k.keeper.acknowledged == {"resourceSubscriptions": []}
    for params in ([1], "x", {"notifications": [1]}, None):
        k.keeper.on_notification(notification(ack, params))
        assert k.keeper.acknowledged == {}


async def test_what_a_notification_read_for_one_field_holds_beside_it_is_never_built() -> None:
    k = Keeper()
    heard: list[str] = []
    k.keeper.on_updated = lambda alias, uri: heard.append(uri)
    junk = [{}] * 250_000  # near the most a notification may be
    updated = notification("notifications/resources/updated", {"junk": junk, "uri": "f://a"})
    assert peak_bytes(lambda: k.keeper.on_notification(updated)) < 4 * size(updated)
    assert heard == ["f://a"]
    honoured = {"resourceSubscriptions": ["f://a"], "junk": junk}
    ack = notification("notifications/subscriptions/acknowledged", {"notifications": honoured})
    assert peak_bytes(lambda: k.keeper.on_notification(ack)) < 4 * size(ack)
    assert k.keeper.acknowledged == {}  # more than an answer to mcpd's listen holds


async def test_task_news_is_passed_on_only_with_params() -> None:
    k = Keeper()
    news: list[bytes] = []
    k.keeper.on_task = lambda alias, params: news.append(bytes(params))
    k.keeper.on_notification(notification("notifications/tasks"))
    k.keeper.on_notification(notification("notifications/tasks", {"taskId": "t"}))
    assert news == [b'{"taskId": "t"}']


# -- subscriptions --


async def test_a_legacy_server_hears_one_subscribe_per_uri_whatever_the_agents(
    autojump_clock: trio.testing.MockClock,
) -> None:
    k = Keeper()
    up = ScriptedUp({"resources": {"subscribe": True}})
    up.answers["resources/subscribe"] = {}
    up.answers["resources/unsubscribe"] = {}
    for _ in range(3):
        k.keeper.add_subscription("f://a")
    assert k.wakes == 1 and k.keeper.due
    await k.keeper.tend(as_up(up))
    assert up.sent == [("resources/subscribe", features.SubscribeParams(uri="f://a"))]
    k.keeper.drop_subscription("f://a")
    k.keeper.drop_subscription("f://a")
    assert not k.keeper.due
    k.keeper.drop_subscription("f://a")
    await trio.sleep_until(k.keeper.waits_until())
    await k.keeper.tend(as_up(up))
    assert up.methods() == ["resources/subscribe", "resources/unsubscribe"]
    k.keeper.drop_subscription("f://a")  # once more than it was added
    k.keeper.drop_subscription("f://never")
    assert not k.keeper.due and k.keeper.subscribed == {}


async def test_after_a_reconnect_a_legacy_server_is_subscribed_again() -> None:
    k = Keeper()
    up = ScriptedUp({"resources": {"subscribe": True}})
    up.answers.update(
        {
            "resources/subscribe": {},
            "resources/list": {"resources": []},
            "resources/templates/list": {"resourceTemplates": []},
        }
    )
    k.keeper.add_subscription("f://b")
    k.keeper.add_subscription("f://a")
    await k.keeper.tend(as_up(up))
    up.sent.clear()
    await k.keeper.fetch(as_up(up))
    assert k.keeper.due
    await k.keeper.tend(as_up(up))
    assert [p.uri for m, p in up.sent if m == "resources/subscribe"] == ["f://a", "f://b"]


@pytest.mark.parametrize(
    "failure", [rpc.RPCError(-32603, "busy"), {"prompts": [], "nextCursor": "1"}]
)
async def test_prompts_that_fail_when_connecting_leave_resources_and_subscriptions_to_be_had(
    failure: Any,
) -> None:
    # A cursor handed back for the page it came with: the page breaks the protocol.
    answers = AnswerWait("srv")
    k = Keeper(answers)
    up = ScriptedUp({"prompts": {}, "resources": {"subscribe": True}})
    up.answers.update(
        {
            "prompts/list": failure if isinstance(failure, Exception) else lambda p: failure,
            "resources/list": {"resources": [{"uri": "f://a"}]},
            "resources/templates/list": {"resourceTemplates": []},
            "resources/subscribe": {},
        }
    )
    k.keeper.add_subscription("f://a")
    await k.keeper.fetch(as_up(up))
    assert k.catalog.resources.count("srv") == (1, 0)
    # Said where ``mcpd status`` reads it, as a list failing when fetched again is.
    assert answers.trouble is not None
    assert answers.trouble.reason.startswith("prompts/list failed: ")
    assert k.keeper.due
    await k.keeper.tend(as_up(up))
    assert ("resources/subscribe", features.SubscribeParams(uri="f://a")) in up.sent


async def test_a_legacy_server_hears_a_burst_of_changes_once_as_what_they_come_to(
    autojump_clock: trio.testing.MockClock,
) -> None:
    k = Keeper()
    up = ScriptedUp({"resources": {"subscribe": True}})
    up.answers["resources/subscribe"] = {}
    up.answers["resources/unsubscribe"] = {}
    k.keeper.add_subscription("f://a")
    await k.keeper.tend(as_up(up))
    up.sent.clear()
    for _ in range(50):  # an agent subscribing and letting go without end
        k.keeper.add_subscription("f://toggled")
        await k.keeper.tend(as_up(up))
        k.keeper.drop_subscription("f://toggled")
        await k.keeper.tend(as_up(up))
    k.keeper.add_subscription("f://b")
    assert up.sent == [] and not k.keeper.due
    await trio.sleep_until(k.keeper.waits_until())
    await k.keeper.tend(as_up(up))
    assert up.sent == [("resources/subscribe", features.SubscribeParams(uri="f://b"))]


async def test_a_refused_subscribe_is_logged_and_the_rest_still_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    k = Keeper()
    up = ScriptedUp({"resources": {"subscribe": True}})

    def subscribe(params: features.SubscribeParams) -> Any:
        if params.uri == "f://a":
            raise rpc.RPCError(-32002, "no such resource")
        return {}

    up.answers["resources/subscribe"] = subscribe
    k.keeper.add_subscription("f://a")
    k.keeper.add_subscription("f://b")
    with caplog.at_level(logging.INFO, logger="mcpd.server"):
        await k.keeper.tend(as_up(up))
    assert up.methods() == ["resources/subscribe", "resources/subscribe"]
    assert any('f://a refused: "no such resource"' in r.getMessage() for r in caplog.records)


async def test_a_legacy_server_without_subscribe_is_never_asked_to() -> None:
    k = Keeper()
    up = ScriptedUp({"resources": {}})
    k.keeper.add_subscription("f://a")
    assert not k.keeper.supports_subscriptions(as_up(up))
    assert not k.keeper.supports_subscriptions(None)
    await k.keeper.tend(as_up(up))
    assert up.sent == [] and not k.keeper.due


async def test_a_modern_server_is_not_sent_legacy_subscribes() -> None:
    k = Keeper()
    up = ScriptedUp({"resources": {"subscribe": True}}, era="modern")
    k.keeper.add_subscription("f://a")
    await k.keeper.tend(as_up(up))
    assert up.sent == [] and not k.keeper.due


# -- the modern listen --


async def test_the_listen_asks_nothing_until_the_server_declares_what_it_can_tell(
    autojump_clock: trio.testing.MockClock,
) -> None:
    k = Keeper()
    up = ScriptedUp({"prompts": {}, "resources": {"listChanged": "yes"}}, era="modern")
    lists = ToolListKeeper("srv", lambda: None, lambda: True, lambda tools: None)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(k.keeper.listen, as_up(up), lists)
            await trio.testing.wait_all_tasks_blocked()
            assert up.listens == []
            # Asked for its discover answer again, it declares its prompts' changes.
            up.capabilities = msgspec.structs.replace(up.capabilities, prompts_changed=True)
            k.keeper.capabilities_changed()
            await up.listening.wait()
            assert up.listens == [{"promptsListChanged": True}]
            assert k.keeper.prompts_due and k.keeper.resources_due
            nursery.cancel_scope.cancel()


async def test_the_listen_follows_the_subscribed_uris_and_relistens_when_ended(
    autojump_clock: trio.testing.MockClock,
) -> None:
    k = Keeper()
    caps = {"tools": {"listChanged": True}, "resources": {"subscribe": True, "listChanged": True}}
    up = ScriptedUp(caps, era="modern")
    lists = ToolListKeeper("srv", lambda: None, lambda: True, lambda tools: None)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(k.keeper.listen, as_up(up), lists)
            await up.listening.wait()
            up.listening = trio.Event()
            k.keeper.add_subscription("f://b")
            k.keeper.add_subscription("f://a")
            await up.listening.wait()
            up.listening = trio.Event()
            k.keeper.add_subscription("f://a")  # no new URI: the listen stays
            k.keeper.watch_task("t1", True)  # the server has no tasks
            await up.listening.wait()
            up.listening = trio.Event()
            assert up.listens[0] == {"toolsListChanged": True, "resourcesListChanged": True}
            assert up.listens[-1]["resourceSubscriptions"] == ["f://a", "f://b"]
            assert "taskIds" not in up.listens[-1]
            count = len(up.listens)
            up.end_listen.set()  # the server ends it: everything may have changed
            await up.listening.wait()
            assert len(up.listens) == count + 1
            assert k.keeper.prompts_due and k.keeper.resources_due and lists.due
            nursery.cancel_scope.cancel()


async def test_a_refused_listen_is_sent_again_after_a_backoff_the_tool_list_on_its_ttl(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # The server took up the subscription, then answered the listen with an error:
    # no change is told on it, so the tool list is refreshed by its ttl until a
    # listen sent again, later and later, is taken.
    k = Keeper()
    up = ScriptedUp({"tools": {"listChanged": True}}, era="modern")
    up.listen_error = rpc.RPCError(-32603, "internal error")
    lists = ToolListKeeper("srv", lambda: None, lambda: True, lambda tools: None)
    up.notify = lists.on_notification
    ack = {"notifications": {"toolsListChanged": True}}
    up.heard_on_listen = [notification("notifications/subscriptions/acknowledged", ack)]
    with caplog.at_level(logging.INFO, logger="mcpd.server"):
        with trio.move_on_after(1 + 2 + 4 + 0.5):
            await k.keeper.listen(as_up(up), lists)
    assert up.listens == [{"toolsListChanged": True}] * 4
    assert not lists.subscribed
    said = [r.getMessage() for r in caplog.records]
    assert said[0] == (
        'srv: subscriptions/listen refused ("internal error"); relying on ttl, listening'
        " again in 1 s"
    )
    assert said[2].endswith("listening again in 4 s")


async def test_a_burst_of_subscription_changes_is_listened_to_once_a_second_at_most(
    autojump_clock: trio.testing.MockClock,
) -> None:
    k = Keeper()
    up = ScriptedUp({"resources": {"subscribe": True}}, era="modern")
    lists = ToolListKeeper("srv", lambda: None, lambda: True, lambda tools: None)
    toggles = 300
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(k.keeper.listen, as_up(up), lists)
            k.keeper.add_subscription("f://kept")
            start = trio.current_time()
            for n in range(toggles):  # another agent changing its own all the time
                k.keeper.add_subscription(f"f://toggled/{n}")
                await trio.sleep(0.005)
                k.keeper.drop_subscription(f"f://toggled/{n}")
                await trio.sleep(0.005)
            spent = trio.current_time() - start
            up.listening = trio.Event()
            await up.listening.wait()
            nursery.cancel_scope.cancel()
    assert len(up.listens) <= 2 + spent / MIN_RESUBSCRIBE < toggles
    assert up.listens[-1] == {"resourceSubscriptions": ["f://kept"]}


class SlowToListen(ScriptedUp):
    """A modern server that takes a while to take up a listen (reading its URIs), then
    tells an update of each URI it names every so often until the listen ends."""

    def __init__(self, keeper: PromptResourceKeeper) -> None:
        super().__init__({"resources": {"subscribe": True}}, era="modern")
        self.keeper = keeper

    async def listen_for(self, notifications: dict[str, Any]) -> None:
        self.listens.append(dict(notifications))
        await trio.sleep(0.2)
        while True:
            for uri in notifications.get("resourceSubscriptions", []):
                updated = notification("notifications/resources/updated", {"uri": uri})
                self.keeper.on_notification(updated)
            await trio.sleep(0.1)


async def test_updates_reach_a_subscriber_while_another_agent_changes_its_own(
    autojump_clock: trio.testing.MockClock,
) -> None:
    k = Keeper()
    up = SlowToListen(k.keeper)
    heard: list[str] = []
    k.keeper.on_updated = lambda alias, uri: heard.append(uri)
    lists = ToolListKeeper("srv", lambda: None, lambda: True, lambda tools: None)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(k.keeper.listen, as_up(up), lists)
            k.keeper.add_subscription("f://watched")
            for n in range(200):  # more often than the server takes a listen up
                k.keeper.add_subscription(f"f://toggled/{n}")
                await trio.sleep(0.01)
                k.keeper.drop_subscription(f"f://toggled/{n}")
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    assert "f://watched" in heard
