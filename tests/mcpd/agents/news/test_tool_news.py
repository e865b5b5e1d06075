"""Agents told their tool list changed, on their own: one notification for a burst of
changes, unsolicited to a legacy agent and on each listen of a modern one, and none to
an agent whose own profile did not change since it was last told."""

from __future__ import annotations

import gc
import json
import weakref
from dataclasses import dataclass, field
from typing import Any, cast

import trio
import trio.testing

from mcpd.agents.connection.agent_connection import Connection
from mcpd.agents.news.tool_news import ToolNews
from mcpd.agents.profiles import Profile
from protocol.mcp import core as mcp


@dataclass
class Session:
    legacy_version: str | None


@dataclass
class ProfileStub:
    version: int = 0


@dataclass
class Agent:
    """What the news reads and writes of an agent's connection."""

    profile: ProfileStub
    session: Session
    subscriptions: list[Any] = field(default_factory=list)
    seen_version: int = 0
    sent: list[dict[str, Any]] = field(default_factory=list)

    def send_nowait(self, data: bytes) -> None:
        self.sent.append(json.loads(data))


def news_for(*agents: Agent) -> ToolNews:
    return ToolNews(
        lambda: [cast(Connection, a) for a in agents],
        lambda conn: cast(Profile, cast(Agent, conn).profile),
    )


CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


async def test_a_burst_of_changes_is_told_once_to_a_legacy_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    profile = ProfileStub()
    agent = Agent(profile, Session("2025-06-18"))
    news = news_for(agent)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(news.run)
        for _ in range(5):
            profile.version += 1
            news.changed()
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert agent.sent == [CHANGED]
    assert agent.seen_version == 5


async def test_a_modern_agent_hears_it_on_each_listen_it_holds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    profile = ProfileStub()
    agent = Agent(profile, Session(None), subscriptions=["a", 7])
    news = news_for(agent)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(news.run)
        profile.version += 1
        news.changed()
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert [m["params"]["_meta"][mcp.KEY_SUBSCRIPTION_ID] for m in agent.sent] == ["a", 7]
    assert all(m["method"] == CHANGED["method"] for m in agent.sent)


async def test_only_agents_whose_own_profile_changed_since_they_were_told_hear_of_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    changed, unchanged = ProfileStub(), ProfileStub()
    told = Agent(changed, Session("2025-06-18"))
    other = Agent(unchanged, Session("2025-06-18"))
    late = Agent(changed, Session("2025-06-18"), seen_version=1)  # came after the change
    news = news_for(told, other, late)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(news.run)
        changed.version += 1
        news.changed()
        await trio.sleep(1)
        news.changed()  # nothing new since: no one is told again
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert (told.sent, other.sent, late.sent) == ([CHANGED], [], [])


async def test_an_agent_told_and_gone_is_not_kept_while_the_news_waits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """What a connection held (a line half read) goes with it, not at the next news."""
    profile = ProfileStub()
    agents = [Agent(profile, Session("2025-06-18"))]
    news = ToolNews(
        lambda: [cast(Connection, a) for a in agents],
        lambda conn: cast(Profile, cast(Agent, conn).profile),
    )
    gone = weakref.ref(agents[0])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(news.run)
        profile.version += 1
        news.changed()
        await trio.sleep(1)
        assert agents[0].sent == [CHANGED]
        agents.clear()
        gc.collect()
        assert gone() is None
        nursery.cancel_scope.cancel()
