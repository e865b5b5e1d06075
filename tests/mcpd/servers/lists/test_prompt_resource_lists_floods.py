"""A server announcing resource- or prompt-list changes in a loop (one after every
fetch) gets each list fetched at most once a second, and what it announced is in a
list fetched after it."""

from __future__ import annotations

import itertools
import math
from typing import Any, cast

import msgspec
import trio
import trio.testing
from msgspec import Raw

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import NamingConfig
from mcpd.policy.redaction.guard import SecretGuard
from mcpd.policy.redaction.masking import KnownSecrets
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.connected.upstream import Upstream
from mcpd.servers.lists.prompt_resource_lists import MIN_REFETCH, PromptResourceKeeper
from protocol.jsonrpc import messages as rpc
from protocol.mcp.greeting import ServerCapabilities

RESOURCES_CHANGED = rpc.Notification(method="notifications/resources/list_changed", params=None)
PROMPTS_CHANGED = rpc.Notification(method="notifications/prompts/list_changed", params=None)


class Storming:
    """A legacy server whose lists change with every fetch, and that says they
    changed right after each fetch of its templates and prompts, ``storms`` times."""

    alias = "storm"
    guard = SecretGuard(KnownSecrets())  # holding none
    max_pages = 10
    capabilities = ServerCapabilities(
        resources=True, resources_changed=True, prompts=True, prompts_changed=True
    )

    def __init__(self, storms: float) -> None:
        self.storms = storms
        self.version = 0
        self.fetched_at: dict[str, list[float]] = {"resources/list": [], "prompts/list": []}
        self.keeper: PromptResourceKeeper | None = None
        self.listed = ""  # the URI its resource list held last
        self.meta = self  # a legacy session's requests carry no _meta
        self.limits = parse_config({"servers": {"storm": {"command": "x"}}}, env={}).list_limits(
            "storm"
        )

    def of(self, capabilities: Any, agent_meta: Any) -> Any:
        return msgspec.UNSET

    async def request(self, method: str, params: Any) -> Raw:
        await trio.sleep(0.001)  # a round trip
        if method in self.fetched_at:
            self.fetched_at[method].append(trio.current_time())
            self.version += 1
        assert self.keeper is not None
        if self.storms > 0 and method == "resources/templates/list":
            self.storms -= 1
            self.keeper.on_notification(RESOURCES_CHANGED)
        if self.storms > 0 and method == "prompts/list":
            self.keeper.on_notification(PROMPTS_CHANGED)
        if method == "prompts/list":
            return Raw(msgspec.json.encode({"prompts": [{"name": f"p{self.version}"}]}))
        if method == "resources/list":
            self.listed = f"s://{self.version}"
            return Raw(msgspec.json.encode({"resources": [{"uri": self.listed, "name": "r"}]}))
        return Raw(msgspec.json.encode({"resourceTemplates": [{"uriTemplate": "s://{n}"}]}))


async def tended(up: Storming, seconds: float) -> Catalog:
    """The server's lists kept for ``seconds`` as its session's task keeps them."""
    catalog = Catalog(NamingConfig())
    wake = trio.Event()

    def poke() -> None:
        wake.set()

    keeper = PromptResourceKeeper("storm", catalog, poke, lambda: None)
    up.keeper = keeper
    server = cast(Upstream, up)

    async def session() -> None:
        nonlocal wake
        await keeper.fetch(server)
        while True:
            if keeper.due:
                await keeper.tend(server)
                continue
            wake = trio.Event()
            with trio.move_on_at(keeper.waits_until()):
                await wake.wait()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(session)
        await trio.sleep(seconds)
        nursery.cancel_scope.cancel()
    return catalog


async def test_a_list_changed_after_every_fetch_is_fetched_once_a_second(
    autojump_clock: trio.testing.MockClock,
) -> None:
    up = Storming(math.inf)
    await tended(up, 10.0)
    for method in ("resources/list", "prompts/list"):
        times = up.fetched_at[method]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert 9 <= len(times) <= 11, (method, times)
        assert all(gap >= MIN_REFETCH for gap in gaps), gaps


async def test_the_last_change_announced_is_fetched(
    autojump_clock: trio.testing.MockClock,
) -> None:
    up = Storming(5)
    catalog = await tended(up, 30.0)
    times = up.fetched_at["resources/list"]
    assert len(times) == 6  # the first fetch, and one for each change announced
    # Each at the end of the interval after the one before: none lost, none put off.
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(MIN_REFETCH <= gap <= MIN_REFETCH + 0.01 for gap in gaps), gaps
    [shown] = [msgspec.json.decode(raw) for raw in catalog.resources.listing()]
    assert shown["uri"] == up.listed


async def test_a_single_change_after_a_quiet_while_is_fetched_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    up = Storming(0)
    catalog = Catalog(NamingConfig())
    keeper = PromptResourceKeeper("storm", catalog, lambda: None, lambda: None)
    up.keeper = keeper
    server = cast(Upstream, up)
    await keeper.fetch(server)
    await trio.sleep(10)
    keeper.on_notification(RESOURCES_CHANGED)
    assert keeper.due
    start = trio.current_time()
    await keeper.tend(server)
    assert up.fetched_at["resources/list"][-1] == start + 0.001
