"""What agents get beyond tools/list, called directly on ``ExtraMethods`` over a catalog
with no server running: the methods of one era refused in the other, the tasks
extension asked for where it is needed, a listen honouring only what it asked for,
the audit record of each request, and the news of a changed prompt or resource list
going only to the agents whose own profile's lists changed, in the shape their era
takes."""

from __future__ import annotations

import gc
import typing
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from msgspec import Raw

from mcpd.agents.agent import NO_ONE, Agent, AgentCall
from mcpd.agents.askback.askers import AgentRequests, DirectAsker
from mcpd.agents.askback.driver import AskBackDriver
from mcpd.agents.beyond_tools.extra_methods import ExtraMethods
from mcpd.agents.beyond_tools.prompts import OUTAGE
from mcpd.agents.calls.callrecords import CallRecords
from mcpd.agents.entry.identity import AgentIdentity
from mcpd.agents.tasks.table import Tasks
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import DaemonConfig, NamingConfig, ProfileConfig
from mcpd.policy.deciders.kin import AgentKin
from mcpd.registry.profiles.views import ProfileView
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.all_servers import AllServers
from mcpd.servers.asking.progress import ProgressSink
from mcpd.servers.calling.calls import Call, Outcome
from mcpd.servers.shared import AgentKey
from mcpd.servers.supervisor import Supervisor
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.mcp.serving import AgentSession, RequestContext
from tests.support.parts.routing import Audit

TASKS = {"extensions": {features.TASKS_EXTENSION: {}}}
MODERN = RequestContext("modern", mcp.LATEST_MODERN, {}, {})
MODERN_TASKS = RequestContext("modern", mcp.LATEST_MODERN, {}, TASKS)
LEGACY = RequestContext("legacy", "2025-11-25", {}, {})


class Settings:
    settings = DaemonConfig()


class FakeAgent(Agent):
    """A connection as far as the methods need one: what it is sent is kept."""

    def __init__(self, legacy: bool = False) -> None:
        self.session = AgentSession(mcp.Implementation(name="mcpd", version="0"), {})
        if legacy:
            self.session.legacy_version = "2025-11-25"
        self.contexts = {}
        self.owner = self.listen_owner = AgentKey()
        self.asks = AgentRequests()
        self.sent: list[bytes] = []
        self.refusing_asker = DirectAsker(self.owner, None, self.asks, self.offer)
        self.progress: ProgressSink = lambda params: None
        self.identity = AgentIdentity(None)
        self.fixed_profile = None

    def finish(self, call: AgentCall, outcome: Outcome) -> None:
        raise AssertionError("no call is started here")

    def in_task(self, call: AgentCall, answer: Callable[[], Awaitable[bytes]]) -> None:
        raise AssertionError("no call is started here")

    def offer(self, data: bytes, rid: rpc.Id | None = None) -> bool:
        self.sent.append(data)
        return True

    def news_sender(self) -> Callable[[bytes], None]:
        return self.send_nowait

    async def kin(self) -> AgentKin:
        return AgentKin()  # no process of its own

    async def send(self, data: bytes, rid: rpc.Id | None = None) -> None:
        self.offer(data, rid)

    async def drain(self) -> None:
        pass

    def stopping(self) -> None:
        pass

    def messages(self) -> list[dict[str, Any]]:
        out = [msgspec.json.decode(line) for line in self.sent]
        self.sent.clear()
        return out


class World:
    """Two servers' prompts and resources in a catalog, and the methods over them; an
    agent's profile is the one ``profiles`` names for it (else every server)."""

    def __init__(self) -> None:
        self.catalog = Catalog(NamingConfig())
        self.catalog.prompts.update("notes", [features.Prompt(name="daily")])
        self.catalog.prompts.update("other", [features.Prompt(name="weekly")])
        config = parse_config(
            {"servers": {"notes": {"command": "x"}, "other": {"command": "x"}}}, env={}
        )
        self.servers = AllServers(Supervisor(config, self.catalog), self.catalog)
        self.audit = Audit()
        self.agents: list[FakeAgent] = []
        self.profiles: dict[int, ProfileView] = {}
        self.extras = ExtraMethods(
            self.servers,
            Settings(),  # type: ignore[arg-type]
            lambda: self.agents,
            CallRecords(self.audit, wall=lambda: 100.0),  # type: ignore[arg-type]
            AskBackDriver(),
            Tasks(self.servers, lambda: DaemonConfig().result_budget_chars, DaemonConfig),
            self.view_of,
        )

    def view_of(self, conn: Agent) -> ProfileView:
        found = self.profiles.get(id(conn))
        if found is None:
            found = self.profiles[id(conn)] = ProfileView("default", self.catalog)
        return found

    def agent(self, legacy: bool = False, servers: list[str] | None = None) -> FakeAgent:
        conn = FakeAgent(legacy)
        if servers is not None:
            view = ProfileView("narrow", self.catalog)
            view.configure(ProfileConfig(servers=servers), NamingConfig(), 128)
            self.profiles[id(conn)] = view
        self.agents.append(conn)
        self.extras.joined(conn)
        return conn

    async def call(
        self, conn: Agent, method: str, params: Any, ctx: RequestContext | None = None
    ) -> Any:
        req = rpc.Request(1, method, Raw(msgspec.json.encode(params)))
        return await self.extras.handlers()[method](conn, req, ctx)


def test_each_method_takes_the_agent_and_says_what_it_answers() -> None:
    for method, handler in World().extras.handlers().items():
        hints = typing.get_type_hints(handler)
        assert hints["conn"] is Agent and hints["return"] is not Any, method


# -- one era's methods in the other --


@pytest.mark.parametrize(
    ("method", "params", "instead"),
    [
        ("resources/subscribe", {"uri": "file:///a"}, "subscriptions/listen"),
        ("resources/unsubscribe", {"uri": "file:///a"}, "subscriptions/listen"),
        ("logging/setLevel", {"level": "debug"}, mcp.KEY_LOG_LEVEL),
    ],
)
async def test_a_handshake_method_from_a_modern_agent_is_refused_naming_what_to_use(
    method: str, params: dict[str, Any], instead: str
) -> None:
    world = World()
    conn = world.agent()
    with pytest.raises(rpc.RPCError) as refused:
        await world.call(conn, method, params, MODERN)
    assert refused.value.code == rpc.METHOD_NOT_FOUND
    assert method in refused.value.message and instead in refused.value.message


async def test_a_log_level_that_is_none_is_refused_naming_the_levels() -> None:
    world = World()
    conn = world.agent(legacy=True)
    with pytest.raises(rpc.RPCError) as refused:
        await world.call(conn, "logging/setLevel", {"level": "loud"}, LEGACY)
    assert refused.value.code == rpc.INVALID_PARAMS
    assert "'loud'" in refused.value.message and "debug" in refused.value.message
    assert await world.call(conn, "logging/setLevel", {"level": "debug"}, LEGACY) == {}


async def test_subscribing_to_a_resource_of_a_server_that_offers_none_is_refused() -> None:
    world = World()
    world.catalog.resources.update("notes", [features.Resource(uri="file:///a", name="a")], [])
    conn = world.agent(legacy=True)
    with pytest.raises(rpc.RPCError) as refused:
        await world.call(conn, "resources/subscribe", {"uri": "file:///a"}, LEGACY)
    assert refused.value.code == rpc.METHOD_NOT_FOUND and "'notes'" in refused.value.message


# -- tasks --


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
@pytest.mark.parametrize("ctx", [None, LEGACY, MODERN], ids=["no-context", "legacy", "modern"])
async def test_a_task_method_without_the_tasks_extension_says_it_is_needed(
    method: str, ctx: RequestContext | None
) -> None:
    world = World()
    with pytest.raises(rpc.RPCError) as refused:
        await world.call(world.agent(), method, {"taskId": "t1"}, ctx)
    assert refused.value.code == rpc.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert refused.value.data == {"requiredCapabilities": TASKS}


async def test_a_task_is_known_to_the_agent_it_was_handed_to_only() -> None:
    world = World()
    mine, theirs = world.agent(), world.agent()
    handle = {"resultType": features.TASK, "taskId": "t-1"}
    out = Call(1, "mcp__notes__slow", None, NO_ONE, MODERN_TASKS, owner=mine.owner, alias="notes")
    call = AgentCall(out, mine, to=mine, tasks=True)
    handed = world.extras.tasks.finish(call, handle, links=False)
    assert isinstance(handed, dict) and handed["taskId"] == "notes:t-1"
    with pytest.raises(rpc.RPCError, match="Unknown task 'notes:t-1'"):
        await world.call(theirs, "tasks/get", {"taskId": "notes:t-1"}, MODERN_TASKS)
    # Its own agent's request goes to the task's server (which is not running).
    with pytest.raises(rpc.RPCError) as down:
        await world.call(mine, "tasks/get", {"taskId": "notes:t-1"}, MODERN_TASKS)
    assert down.value.code == -32000 and "notes" in down.value.message
    world.extras.left(mine.owner)


# -- listens --


def test_a_listen_honours_only_the_list_changes_it_asked_for() -> None:
    world = World()
    conn = world.agent()
    wanted = {"promptsListChanged": True, "resourcesListChanged": False, "toolsChanged": True}
    assert world.extras.open_listen(conn, "L", wanted, MODERN) == {"promptsListChanged": True}


def test_a_listen_naming_task_ids_without_the_tasks_extension_is_refused() -> None:
    world = World()
    conn = world.agent()
    with pytest.raises(rpc.RPCError) as refused:
        world.extras.open_listen(conn, "L", {"taskIds": ["t-1"]}, MODERN)
    assert refused.value.code == rpc.MISSING_REQUIRED_CLIENT_CAPABILITY
    honoured = world.extras.open_listen(conn, "M", {"taskIds": ["t-1", 5, None]}, MODERN_TASKS)
    assert honoured == {"taskIds": []}  # none of them is this agent's


@pytest.mark.parametrize("uris", ["file:///a", {"uri": "file:///a"}, [5, None, ["x"]], None])
async def test_a_listens_resource_subscriptions_that_are_no_list_of_uris_hold_nothing(
    uris: Any,
) -> None:
    world = World()
    conn = world.agent()
    honoured = world.extras.open_listen(conn, "L", {"resourceSubscriptions": uris}, MODERN)
    assert honoured == {"resourceSubscriptions": []}


# -- the audit record of each request --


async def test_a_request_for_an_unknown_prompt_is_recorded_as_refused() -> None:
    world = World()
    conn = world.agent()
    with pytest.raises(rpc.RPCError):
        await world.call(conn, "prompts/get", {"name": "mcp__notes__nope"}, MODERN)
    [record] = world.audit.records
    assert (record.method, record.name, record.outcome) == (
        "prompts/get",
        "mcp__notes__nope",
        "refused",
    )
    assert record.agent.era == "modern" and record.agent.profile == "default"


async def test_only_a_request_that_went_to_its_server_is_recorded_as_allowed() -> None:
    """No rule covers prompts and resources: one mcpd sent on was allowed by default,
    one it refused itself (an unknown name, params that are no request) was decided by
    nobody."""
    world = World()
    conn = world.agent()
    for params in ({"name": "mcp__notes__nope"}, {"name": 5}):
        with pytest.raises((rpc.RPCError, rpc.InvalidParams)):
            await world.call(conn, "prompts/get", params, MODERN)
    down = await world.call(conn, "prompts/get", {"name": "mcp__notes__daily"}, MODERN)
    assert msgspec.json.decode(down)["error"]["code"] == OUTAGE
    decided = [(r.outcome, r.decision, r.decided_by) for r in world.audit.records]
    assert decided == [
        ("refused", "none", ""),
        ("error", "none", ""),
        ("outage", "allow", "default"),
    ]


async def test_a_request_with_bad_params_is_recorded_as_an_error_cut_short() -> None:
    world = World()
    conn = world.agent(legacy=True, servers=["notes"])
    with pytest.raises(rpc.InvalidParams):
        await world.call(conn, "prompts/get", {"name": ["x" * 1000]}, LEGACY)
    [record] = world.audit.records
    assert record.outcome == "error" and record.name is None
    assert record.reason is not None and record.reason.startswith("Invalid params: ")
    assert len(record.reason) <= 200
    assert record.agent.era == "legacy" and record.agent.profile == "narrow"


async def test_a_prompt_outside_the_agents_profile_is_unknown_to_it() -> None:
    world = World()
    conn = world.agent(servers=["notes"])
    listed = await world.call(conn, "prompts/list", {}, MODERN)
    assert [msgspec.json.decode(p)["name"] for p in listed.prompts] == ["mcp__notes__daily"]
    with pytest.raises(rpc.RPCError, match="Unknown prompt"):
        await world.call(conn, "prompts/get", {"name": "mcp__other__weekly"}, MODERN)


# -- list-change news --


def notes(conn: FakeAgent) -> list[tuple[str, Any]]:
    return [(m["method"], m.get("params")) for m in conn.messages()]


async def test_list_changes_reach_only_the_agents_whose_profile_lists_changed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    world = World()
    legacy_all = world.agent(legacy=True)
    legacy_narrow = world.agent(legacy=True, servers=["notes"])
    modern = world.agent()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(world.extras.run)
        world.catalog.prompts.update("other", [features.Prompt(name="monthly")])
        world.extras.list_changed()
        await trio.sleep(1)
        assert notes(legacy_all) == [("notifications/prompts/list_changed", None)]
        assert notes(legacy_narrow) == []  # its profile has not "other"
        assert notes(modern) == []  # it has no listen: nothing unsolicited
        world.catalog.resources.update("notes", [features.Resource(uri="n:/1", name="1")], [])
        world.extras.list_changed()
        await trio.sleep(1)
        assert notes(legacy_narrow) == [("notifications/resources/list_changed", None)]
        nursery.cancel_scope.cancel()


async def test_a_modern_agent_hears_of_changes_on_each_listen_that_asked_until_it_ends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    world = World()
    conn = world.agent()
    world.extras.open_listen(conn, "prompts", {"promptsListChanged": True}, MODERN)
    world.extras.open_listen(conn, "res", {"resourcesListChanged": True}, MODERN)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(world.extras.run)
        world.catalog.prompts.update("notes", [features.Prompt(name="other")])
        world.extras.list_changed()
        await trio.sleep(1)
        assert notes(conn) == [
            (
                "notifications/prompts/list_changed",
                {"_meta": {mcp.KEY_SUBSCRIPTION_ID: "prompts"}},
            )
        ]
        world.extras.close_listen(conn, "prompts")
        world.catalog.prompts.update("notes", [features.Prompt(name="third")])
        world.extras.list_changed()
        await trio.sleep(1)
        assert notes(conn) == []
        nursery.cancel_scope.cancel()


async def test_what_changed_before_an_agent_joined_is_no_news_to_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    world = World()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(world.extras.run)
        world.catalog.prompts.update("notes", [features.Prompt(name="other")])
        world.extras.list_changed()
        late = world.agent(legacy=True)
        await trio.sleep(1)
        assert notes(late) == []
        nursery.cancel_scope.cancel()


async def test_many_changes_close_together_are_one_notification(
    autojump_clock: trio.testing.MockClock,
) -> None:
    world = World()
    conn = world.agent(legacy=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(world.extras.run)
        for i in range(20):
            world.catalog.prompts.update("notes", [features.Prompt(name=f"p{i}")])
            world.extras.list_changed()
        await trio.sleep(1)
        assert notes(conn) == [("notifications/prompts/list_changed", None)]
        nursery.cancel_scope.cancel()


async def test_an_agent_told_and_gone_is_not_kept_while_the_news_waits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    world = World()
    gone = weakref.ref(world.agent(legacy=True))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(world.extras.run)
        world.catalog.prompts.update("notes", [features.Prompt(name="other")])
        world.extras.list_changed()
        await trio.sleep(1)
        world.agents.clear()
        gc.collect()
        assert gone() is None  # nor what it held (a line half read) with it
        nursery.cancel_scope.cancel()
