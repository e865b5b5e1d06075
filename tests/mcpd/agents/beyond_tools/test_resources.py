"""Resources for agents, called directly over a catalog: lists, the routing of an
agent's URI through its profile (and the errors that must not name a hidden server),
reads refused before a server is asked, and subscriptions held per agent."""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

import msgspec
import pytest
import trio
from msgspec import Raw

from mcpd.agents.askback.driver import AgentSide, AskBackDriver
from mcpd.agents.beyond_tools.allowance import Allowance
from mcpd.agents.beyond_tools.extra_methods import ExtraMethods
from mcpd.agents.beyond_tools.prompts import OUTAGE
from mcpd.agents.beyond_tools.resources import list_resources, read_resource, route
from mcpd.agents.calls.callrecords import CallRecords, Seen
from mcpd.agents.news.subscriptions import MAX_SUBSCRIBED_BYTES, MAX_SUBSCRIPTIONS, Subscriptions
from mcpd.agents.tasks.table import Tasks
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import DEFAULT_POLICY, DaemonConfig, NamingConfig
from mcpd.registry.tables.catalog import Catalog
from mcpd.registry.uris.claims import ROUTE_STEPS, Budget
from mcpd.registry.uris.scheme import Routed, Sight, wrap
from mcpd.servers.all_servers import AllServers
from mcpd.servers.shared import AgentKey, Whose
from mcpd.servers.status.outage import Outage
from mcpd.servers.supervisor import Supervisor
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.mcp.serving import RequestContext
from tests.support.parts.routing import Audit, StandInAgent

MODERN = RequestContext("modern", mcp.LATEST_MODERN, {}, {})
LEGACY = RequestContext("legacy", "2025-11-25", {}, {})
README = "file:///README.md"


class Shows(Sight):
    """A profile that shows only some servers."""

    def __init__(self, *aliases: str) -> None:
        self.aliases = set(aliases)

    def has_server(self, alias: str) -> bool:
        return alias in self.aliases

    def admits_resource(self, alias: str, uri: str) -> bool:
        return alias in self.aliases


class Offering(AllServers):
    """Every server, with no server running; those in ``offering`` take subscriptions,
    and what agents hold upstream is counted."""

    def __init__(self, lists: dict[str, tuple[list[str], list[str]]], offering: set[str]) -> None:
        catalog = Catalog(NamingConfig())
        for alias, (uris, templates) in lists.items():
            catalog.resources.update(
                alias,
                [features.Resource(uri=u, name=u) for u in uris],
                [features.ResourceTemplate(uriTemplate=t, name=t) for t in templates],
            )
        config = parse_config({"servers": {a: {"command": "x"} for a in lists}}, env={})
        super().__init__(Supervisor(config, catalog), catalog)
        self.catalog = catalog
        self.offering = offering
        self.held: Counter[tuple[str, str]] = Counter()

    def subscribable(self, alias: str) -> bool:
        return alias in self.offering

    def subscribe_resource(self, alias: str, uri: str, on: bool) -> None:
        self.held[(alias, uri)] += 1 if on else -1
        assert self.held[(alias, uri)] >= 0, "let go of more than was held"
        super().subscribe_resource(alias, uri, on)

    def announce(self, alias: str, uri: str) -> None:
        """The server says ``uri`` changed (as its runner reports it)."""
        self._updated(alias, uri)


LISTS = {
    "a": ([README, "a://only"], ["a://{id}"]),
    "b": ([README, "b://only"], ["b://{id}"]),
    "c": (["c://only"], ["c://{id}"]),
}


def three_servers(offering: set[str] | None = None) -> Offering:
    return Offering(LISTS, offering or set())


def budget() -> Budget:
    return Budget(ROUTE_STEPS)


class Control:
    settings = DaemonConfig()


class Inbox:
    def __init__(self) -> None:
        self.got: list[dict[str, Any]] = []

    def send(self, data: bytes) -> None:
        self.got.append(msgspec.json.decode(data))

    def uris(self) -> list[str]:
        return [m["params"]["uri"] for m in self.got]


# -- lists --


def test_resources_and_templates_are_listed_apart_and_paged() -> None:
    servers = three_servers()
    first = list_resources(servers, mcp.ListParams(), None, 3, False)
    assert first.resourceTemplates is msgspec.UNSET and isinstance(first.resources, list)
    assert len(first.resources) == 3 and isinstance(first.nextCursor, str)
    rest = list_resources(servers, mcp.ListParams(cursor=first.nextCursor), None, 3, False)
    assert isinstance(rest.resources, list) and len(rest.resources) == 2
    assert rest.nextCursor is msgspec.UNSET
    templates = list_resources(servers, mcp.ListParams(), MODERN, 0, True)
    assert templates.resources is msgspec.UNSET and isinstance(templates.resourceTemplates, list)
    assert len(templates.resourceTemplates) == 3
    assert (templates.ttlMs, templates.cacheScope) == (0, "private")
    with pytest.raises(rpc.RPCError):
        list_resources(servers, mcp.ListParams(cursor="bm90IG1jcGQ="), None, 3, False)


def test_a_profile_lists_only_the_resources_of_the_servers_it_shows() -> None:
    servers = three_servers()
    page = list_resources(servers, mcp.ListParams(), None, 0, False, Shows("b"))
    assert isinstance(page.resources, list)
    servers_named = {msgspec.json.decode(r)["_meta"]["mcpd/server"] for r in page.resources}
    assert servers_named == {"b"}
    uris = {msgspec.json.decode(r)["uri"] for r in page.resources}
    assert README in uris  # not made ambiguous by a server this profile does not show


# -- routing --


def test_a_uri_one_server_lists_or_matches_goes_to_it() -> None:
    servers = three_servers()
    assert route(servers, "a://only", budget()) == Routed("a", "a://only")
    assert route(servers, "b://42", budget()) == Routed("b", "b://42")
    assert route(servers, wrap("a", README), budget()) == Routed("a", README)


def test_a_uri_three_servers_list_is_refused_naming_each_way_to_read_it() -> None:
    with pytest.raises(rpc.RPCError) as refused:
        route(three_servers(), README, budget())
    assert refused.value.code == rpc.INVALID_PARAMS
    assert refused.value.data == {
        "uri": README,
        "candidates": [wrap("a", README), wrap("b", README)],
    }
    assert refused.value.message.startswith(f"2 servers have {README!r}")


def test_through_a_profile_a_uri_a_hidden_server_lists_too_is_the_shown_servers() -> None:
    assert route(three_servers(), README, budget(), Shows("a", "c")) == Routed("a", README)


@pytest.mark.parametrize("uri", [wrap("b", "b://only"), "b://only", "b://42", "z://nothing"])
def test_a_hidden_servers_uri_is_not_found_as_if_it_were_no_ones(uri: str) -> None:
    with pytest.raises(rpc.RPCError) as refused:
        route(three_servers(), uri, budget(), Shows("a", "c"))
    assert refused.value.code == rpc.INVALID_PARAMS
    assert refused.value.message == (
        f'Resource not found: "{uri}". resources/list and resources/templates/list show what '
        "can be read."
    )
    assert refused.value.data == {"uri": uri}
    assert "'b'" not in str(refused.value.data)


def test_a_uri_matched_past_its_budget_is_refused_with_the_way_to_name_its_server() -> None:
    uri = "q://" + "x" * 5000
    with pytest.raises(rpc.RPCError) as refused:
        route(three_servers(), uri, Budget(0))
    assert refused.value.code == rpc.INVALID_PARAMS
    assert "mcpd://SERVER/" in refused.value.message
    assert len(refused.value.message) < 600 and refused.value.data == {"uri": uri}


# -- reads --


async def reading(
    servers: AllServers, uri: str, seen: Seen | None = None, sight: Sight | None = None
) -> bytes:
    sent: list[bytes] = []
    side = AgentSide(object(), True, None, None, sent.append)
    req = rpc.Request(1, "resources/read", Raw(msgspec.json.encode({"uri": uri})))
    with trio.fail_after(5):
        return await read_resource(
            servers, AskBackDriver(), side, req, 1000, Allowance(), sight, seen
        )


async def test_reading_a_uri_of_a_server_that_is_gone_is_its_outage_and_recorded() -> None:
    seen = Seen()
    reply = msgspec.json.decode(await reading(three_servers(), "a://7", seen))
    assert reply["error"]["code"] == OUTAGE
    assert reply["error"]["data"]["mcpd/outage"]["server"] == "a"
    assert seen.name == "a://7" and seen.target == ("a", "a://7")
    assert isinstance(seen.outcome, Outage)


async def test_reading_a_uri_no_shown_server_has_is_refused_before_any_server_is_asked() -> None:
    seen = Seen()
    with pytest.raises(rpc.RPCError, match="Resource not found"):
        await reading(three_servers(), "b://only", seen, Shows("a", "c"))
    assert seen.name == "b://only" and seen.target is None and seen.outcome is None


async def test_a_read_gives_its_steps_back_whether_it_is_routed_or_refused() -> None:
    servers = three_servers()
    allowance = Allowance()
    side = AgentSide(object(), True, None, None, lambda data: None)
    with trio.fail_after(5):
        for uri in ["z://nothing", "a://1"] * 10:
            req = rpc.Request(1, "resources/read", Raw(msgspec.json.encode({"uri": uri})))
            with contextlib.suppress(rpc.RPCError):
                await read_resource(servers, AskBackDriver(), side, req, 1000, allowance)
    assert allowance.now().left == ROUTE_STEPS


@pytest.mark.parametrize("params", [{}, {"uri": 3}, {"uri": None}])
async def test_a_read_without_a_uri_is_invalid_params(params: dict[str, Any]) -> None:
    side = AgentSide(object(), True, None, None, lambda data: None)
    req = rpc.Request(1, "resources/read", Raw(msgspec.json.encode(params)))
    with pytest.raises(rpc.InvalidParams):
        await read_resource(three_servers(), AskBackDriver(), side, req, 1000, Allowance())


# -- subscriptions --


def test_an_update_reaches_exactly_the_agents_subscribed_under_the_uri_each_used() -> None:
    servers = three_servers({"a", "b"})
    subs = Subscriptions(servers)
    plain, wrapped, other = Inbox(), Inbox(), Inbox()
    agents = [object(), object(), object()]
    subs.subscribe(agents[0], "a://only", plain.send, True, budget())
    subs.subscribe(agents[1], wrap("a", "a://only"), wrapped.send, True, budget())
    subs.subscribe(agents[2], "b://only", other.send, True, budget())
    servers.announce("a", "a://only")
    assert plain.uris() == ["a://only"] and wrapped.uris() == [wrap("a", "a://only")]
    assert other.got == []
    assert plain.got[0]["method"] == "notifications/resources/updated"
    assert "_meta" not in plain.got[0]["params"]
    assert servers.held[("a", "a://only")] == 2


def test_subscribing_twice_holds_once_and_unsubscribing_lets_go() -> None:
    servers = three_servers({"a"})
    subs = Subscriptions(servers)
    agent, inbox = object(), Inbox()
    for _ in range(3):
        subs.subscribe(agent, "a://only", inbox.send, True, budget())
    assert servers.held[("a", "a://only")] == 1
    servers.announce("a", "a://only")
    assert inbox.uris() == ["a://only"]
    for _ in range(2):
        subs.subscribe(agent, "a://only", inbox.send, False, budget())
    assert servers.held[("a", "a://only")] == 0
    servers.announce("a", "a://only")
    assert len(inbox.got) == 1


def test_unsubscribing_what_was_never_subscribed_changes_nothing() -> None:
    servers = three_servers({"a"})
    subs = Subscriptions(servers)
    subs.subscribe(object(), "a://only", Inbox().send, False, budget())
    assert +servers.held == Counter()


def test_a_server_without_subscriptions_is_refused_by_name() -> None:
    subs = Subscriptions(three_servers({"b"}))
    with pytest.raises(rpc.RPCError) as refused:
        subs.subscribe(object(), "a://only", Inbox().send, True, budget())
    assert refused.value.code == rpc.METHOD_NOT_FOUND and "'a'" in refused.value.message


def test_a_resource_of_a_server_held_whole_is_not_subscribed_to() -> None:
    servers = three_servers({"a", "b"})
    servers.catalog.gate.policy = lambda alias: DEFAULT_POLICY._replace(
        hold_new_servers=alias == "a"
    )
    servers.catalog.rejudge("a")
    subs = Subscriptions(servers)
    with pytest.raises(rpc.RPCError) as refused:
        subs.subscribe(object(), "a://only", Inbox().send, True, budget())
    assert refused.value.code == OUTAGE and "a is new to mcpd" in refused.value.message
    honoured = subs.listen(
        object(), "L1", ["a://only", "a://9", "b://only"], Inbox().send, budget()
    )
    assert honoured == ["b://only"]
    assert +servers.held == Counter({("b", "b://only"): 1})


def test_a_uri_only_a_held_template_matches_is_not_subscribed_to() -> None:
    servers = three_servers({"a"})
    servers.catalog.gate.settle("a")
    changed = [features.ResourceTemplate(uriTemplate="a://{id}", name="a://{id}", title="new")]
    servers.catalog.resources.update("a", [features.Resource(uri="a://only", name="x")], changed)
    subs = Subscriptions(servers)
    with pytest.raises(rpc.RPCError) as refused:
        subs.subscribe(object(), "a://9", Inbox().send, True, budget())
    assert refused.value.code == OUTAGE and "changed since" in refused.value.message
    assert subs.listen(object(), "L1", ["a://9", "a://only"], Inbox().send, budget()) == [
        "a://only"
    ]
    assert +servers.held == Counter({("a", "a://only"): 1})


def test_a_listen_holds_what_it_can_and_tags_its_updates_with_its_id() -> None:
    servers = three_servers({"a"})
    subs = Subscriptions(servers)
    conn, inbox = object(), Inbox()
    uris: Any = ["a://only", "b://only", "z://nothing", 3, None, README, "a://9"]
    honoured = subs.listen(conn, "L1", uris, inbox.send, budget())
    assert honoured == ["a://only", "a://9"]
    servers.announce("a", "a://9")
    assert inbox.got == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "a://9", "_meta": {mcp.KEY_SUBSCRIPTION_ID: "L1"}},
        }
    ]
    assert subs.listen(conn, "L2", "a://only", inbox.send, budget()) == []
    assert subs.listen(conn, "L3", {"uri": "a://only"}, inbox.send, budget()) == []


def test_a_listen_through_a_profile_holds_nothing_of_a_hidden_server() -> None:
    servers = three_servers({"a", "b"})
    subs = Subscriptions(servers)
    got = subs.listen(
        object(),
        1,
        ["b://only", wrap("b", "b://x"), "a://1"],
        Inbox().send,
        budget(),
        Shows("a", "c"),
    )
    assert got == ["a://1"] and servers.held[("b", "b://only")] == 0


def test_ending_one_listen_keeps_the_agents_other_subscriptions() -> None:
    servers = three_servers({"a"})
    subs = Subscriptions(servers)
    conn, inbox = object(), Inbox()
    subs.listen(conn, 1, ["a://only"], inbox.send, budget())
    subs.listen(conn, 2, ["a://only"], inbox.send, budget())
    subs.subscribe(conn, "a://only", inbox.send, True, budget())
    assert servers.held[("a", "a://only")] == 3
    subs.unlisten(conn, 1)
    servers.announce("a", "a://only")
    tags = sorted(str(m["params"].get("_meta", {}).get(mcp.KEY_SUBSCRIPTION_ID)) for m in inbox.got)
    assert tags == ["2", "None"]
    assert servers.held[("a", "a://only")] == 2


def test_an_agent_gone_lets_go_of_everything_it_held_and_nothing_of_others() -> None:
    servers = three_servers({"a", "b"})
    subs = Subscriptions(servers)
    gone, stays = object(), object()
    left, kept = Inbox(), Inbox()
    subs.subscribe(gone, "a://only", left.send, True, budget())
    subs.listen(gone, 5, ["b://only", "a://2"], left.send, budget())
    subs.subscribe(stays, "a://only", kept.send, True, budget())
    subs.owner_gone(gone)
    assert +servers.held == Counter({("a", "a://only"): 1})
    for alias, uri in [("a", "a://only"), ("b", "b://only"), ("a", "a://2")]:
        servers.announce(alias, uri)
    assert left.got == [] and kept.uris() == ["a://only"]
    subs.owner_gone(gone)  # a second time: nothing left to let go of
    assert +servers.held == Counter({("a", "a://only"): 1})


async def test_an_agent_leaving_lets_go_of_its_subscription_and_listen_not_anothers() -> None:
    servers = three_servers({"a"})
    extras = ExtraMethods(
        servers,
        Control(),  # type: ignore[arg-type]
        list,
        CallRecords(Audit()),  # type: ignore[arg-type]
        AskBackDriver(),
        Tasks(servers, lambda: DaemonConfig().result_budget_chars, DaemonConfig),
    )
    subscribe = extras.handlers()["resources/subscribe"]
    request = rpc.Request(1, "resources/subscribe", Raw(b'{"uri": "a://only"}'))
    # Every server shown: no profile is read.
    gone, stays, exchange = (StandInAgent(None) for _ in range(3))  # type: ignore[arg-type]
    # Over HTTP, a listen is its exchange's own; its session's subscription is not.
    exchange.listen_owner = AgentKey()
    for agent in (gone, stays, exchange):
        await subscribe(agent, request, LEGACY)
        extras.open_listen(agent, "L", {"resourceSubscriptions": ["a://only"]}, MODERN)
    assert servers.held[("a", "a://only")] == 6
    extras.left(gone.owner)
    extras.close_listen(exchange, "L")
    assert servers.held[("a", "a://only")] == 3
    servers.announce("a", "a://only")
    tags = [
        msgspec.json.decode(line)["params"].get("_meta", {}).get(mcp.KEY_SUBSCRIPTION_ID)
        for agent in (gone, stays, exchange)
        for line in agent.sent
    ]
    assert tags == [None, "L", None]  # stays: both; the exchange's session: its own


def test_a_subscription_past_the_limit_is_refused_naming_it_and_never_reaches_the_server() -> None:
    servers = three_servers({"a"})
    subs = Subscriptions(servers)
    greedy, inbox = object(), Inbox()
    for i in range(MAX_SUBSCRIPTIONS):
        subs.subscribe(greedy, f"a://{i}", inbox.send, True, budget())
    with pytest.raises(rpc.RPCError) as refused:
        subs.subscribe(greedy, "a://one-more", inbox.send, True, budget())
    assert refused.value.code == rpc.INVALID_PARAMS
    assert f"at most {MAX_SUBSCRIPTIONS} resource subscriptions" in refused.value.message
    assert servers.held[("a", "a://one-more")] == 0
    subs.subscribe(greedy, "a://7", inbox.send, True, budget())  # already held: no more
    servers.announce("a", "a://7")
    assert inbox.uris() == ["a://7"]
    other = Inbox()
    subs.subscribe(object(), "a://one-more", other.send, True, budget())
    servers.announce("a", "a://one-more")
    assert other.uris() == ["a://one-more"] and inbox.uris() == ["a://7"]


def test_a_listen_naming_more_than_the_limit_leaves_is_refused_and_holds_none_of_it() -> None:
    servers = three_servers({"a"})
    subs = Subscriptions(servers)
    conn, inbox = object(), Inbox()
    held = [f"a://{i}" for i in range(MAX_SUBSCRIPTIONS - 1)]
    assert subs.listen(conn, 1, held, inbox.send, budget()) == held
    with pytest.raises(rpc.RPCError) as refused:
        subs.listen(conn, 2, ["a://x", "a://y"], inbox.send, budget())
    assert refused.value.code == rpc.INVALID_PARAMS
    assert f"at most {MAX_SUBSCRIPTIONS} resource subscriptions" in refused.value.message
    assert servers.held[("a", "a://x")] == 0 and servers.held[("a", "a://y")] == 0
    subs.unlisten(conn, 2)  # as the refused listen ends
    servers.announce("a", "a://3")
    assert inbox.uris() == ["a://3"]
    assert subs.listen(conn, 3, ["a://x"], inbox.send, budget()) == ["a://x"]
    assert subs.listen(object(), 1, ["a://y"], Inbox().send, budget()) == ["a://y"]


def test_a_uri_longer_than_any_real_one_is_never_held() -> None:
    """Each subscription keeps its URI here and at the server: one of a length no real
    URI has is refused, whatever server it names."""
    servers = three_servers({"a"})
    subs = Subscriptions(servers)
    conn, inbox = object(), Inbox()
    huge = wrap("a", "a://" + "x" * 1024 * 1024)
    with pytest.raises(rpc.RPCError) as refused:
        subs.subscribe(conn, huge, inbox.send, True, budget())
    assert refused.value.code == rpc.INVALID_PARAMS
    assert len(refused.value.message) < 200 and "characters" in refused.value.message
    assert subs.listen(conn, 1, [huge, "a://1"], inbox.send, budget()) == ["a://1"]
    assert +servers.held == Counter({("a", "a://1"): 1})


def test_a_connections_long_uris_past_its_bytes_are_refused_naming_the_bound() -> None:
    servers = three_servers({"a"})
    subs = Subscriptions(servers)
    greedy, inbox = object(), Inbox()
    long = ["a://" + f"{i}-".ljust(8000, "x") for i in range(MAX_SUBSCRIBED_BYTES // 8000)]
    for uri in long[:-1]:
        subs.subscribe(greedy, uri, inbox.send, True, budget())
    with pytest.raises(rpc.RPCError) as refused:
        subs.listen(greedy, 1, long[-1:] * 2, inbox.send, budget())
    message = refused.value.message
    assert f"a connection may hold at most {MAX_SUBSCRIBED_BYTES} bytes of subscribed" in message
    assert servers.held[("a", long[-1])] == 0
    assert subs.listen(greedy, 2, ["a://short"], inbox.send, budget()) == ["a://short"]
    for uri in long[:4]:
        subs.subscribe(greedy, uri, inbox.send, False, budget())
    assert subs.listen(greedy, 3, long[-1:], inbox.send, budget()) == long[-1:]
    assert subs.listen(object(), 1, long[:1], Inbox().send, budget()) == long[:1]


def test_all_agents_together_are_bounded_so_a_servers_listen_fits_a_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What mcpd listens to at a server is every URI agents subscribed to there; with
    lines of 64 KiB all of them, from any number of agents, stay within a quarter."""
    line = 64 * 1024
    servers = three_servers({"a"})
    subs = Subscriptions(servers, lambda: DaemonConfig(max_line_bytes=line))
    agents = [object() for _ in range(12)]
    held: list[object] = []
    for n, agent in enumerate(agents):
        uris = [f"a://{n}-{i}-".ljust(1000, "x") for i in range(2)]
        try:
            subs.listen(agent, 1, uris, Inbox().send, budget())
        except rpc.RPCError as exc:
            assert n >= 8 and "all agents together may hold at most 16384 bytes" in exc.message
            continue
        held.append(agent)
    assert len(held) == 8
    upstream = [uri for (alias, uri), count in servers.held.items() if count]
    assert sum(len(msgspec.json.encode(uri)) for uri in upstream) <= line // 4
    subs.owner_gone(held[0])
    assert subs.listen(agents[-1], 2, ["a://" + "y" * 1000], Inbox().send, budget())
    monkeypatch.setattr("mcpd.agents.news.subscriptions.MAX_SUBSCRIPTIONS_IN_ALL", 16)
    assert subs.listen(agents[-1], 3, ["a://z"], Inbox().send, budget()) == ["a://z"]
    with pytest.raises(rpc.RPCError) as refused:
        # Of another user: mcpd's own user and root have a few more past all's.
        subs.subscribe(
            agents[-2], "a://more", Inbox().send, True, budget(), whose=Whose(65534, 9, False)
        )
    assert "all agents together may hold at most 16 resource subscriptions" in (
        refused.value.message
    )
    assert servers.held[("a", "a://more")] == 0


def test_a_reload_that_hides_a_subscriptions_server_lets_go_of_it_upstream_too() -> None:
    servers = three_servers({"a", "b"})
    subs = Subscriptions(servers)
    sight, owner_sight = Shows("a", "b"), Shows("a", "b")
    moved, wrapped, stays, kept = Inbox(), Inbox(), Inbox(), Inbox()
    subs.subscribe(object(), "a://only", moved.send, True, budget(), sight)
    subs.listen(object(), 1, [wrap("a", "a://7"), "b://only"], wrapped.send, budget(), sight)
    subs.subscribe(object(), "a://only", kept.send, True, budget(), owner_sight)
    subs.subscribe(object(), "b://x", stays.send, True, budget(), sight)
    sight.aliases = {"b"}
    subs.reconfigured([sight])
    assert +servers.held == Counter({("a", "a://only"): 1, ("b", "b://only"): 1, ("b", "b://x"): 1})
    for alias, uri in [("a", "a://only"), ("a", "a://7"), ("b", "b://only"), ("b", "b://x")]:
        servers.announce(alias, uri)
    assert moved.got == [] and kept.uris() == ["a://only"]
    assert wrapped.uris() == ["b://only"] and stays.uris() == ["b://x"]


def test_a_profile_switch_lets_go_of_what_the_new_profile_routes_elsewhere() -> None:
    servers = three_servers({"a", "b"})
    subs = Subscriptions(servers)
    agent, inbox = object(), Inbox()
    subs.subscribe(agent, "a://only", inbox.send, True, budget(), Shows("a", "b"))
    subs.subscribe(agent, "b://only", inbox.send, True, budget(), Shows("a", "b"))
    subs.switched(agent, Shows("b"))
    assert +servers.held == Counter({("b", "b://only"): 1})
    servers.announce("a", "a://only")
    servers.announce("b", "b://only")
    assert inbox.uris() == ["b://only"]


def test_an_update_is_told_only_while_the_uri_routes_to_the_server_that_sent_it() -> None:
    servers = three_servers({"a"})
    subs = Subscriptions(servers)
    inbox = Inbox()
    subs.subscribe(object(), "a://only", inbox.send, True, budget(), Shows("a", "b"))
    servers.announce("a", "a://only")
    # b lists it too: the URI is no longer a's alone for this agent.
    servers.catalog.resources.update("b", [features.Resource(uri="a://only", name="x")], [])
    servers.announce("a", "a://only")
    assert inbox.uris() == ["a://only"]
