"""Agents' listens on their tasks, with the servers' side as a runner drives it: a listen
watches only its agent's own tasks, a server's news of one reaches the listens watching
it under the agent's id, and a task whose session ended or whose server the profile hides
is told as mcpd ended it and let go, so nothing said under its id later reaches anyone."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from msgspec import Raw

from mcpd.agents.tasks.table import Tasks
from mcpd.agents.tasks.watches import TaskWatches
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import DaemonConfig
from mcpd.registry.tables.catalog import Catalog
from mcpd.registry.uris.scheme import Sight
from mcpd.servers.all_servers import AllServers
from mcpd.servers.calling.calls import SessionMark
from mcpd.servers.life.server_parts import ServerParts
from mcpd.servers.shared import AgentKey
from mcpd.servers.supervisor import Supervisor
from tests.support.uris.resource_lists import Shows


class Session:
    """A session in force with a server, as far as tasks see it: its mark."""

    def __init__(self) -> None:
        self.mark = SessionMark()


@dataclass
class Listen:
    """One agent's listen: what was sent on it."""

    owner: AgentKey = field(default_factory=AgentKey)
    sent: list[dict[str, Any]] = field(default_factory=list)

    def send(self, line: bytes) -> None:
        self.sent.append(json.loads(line))

    def news(self) -> list[dict[str, Any]]:
        return [m["params"] for m in self.sent if m["method"] == "notifications/tasks"]


class World:
    """Two servers, ``jobs`` and ``build``, each in a session, the agents' tasks and
    their listens' watches."""

    def __init__(self) -> None:
        self.config = parse_config(
            {"servers": {"jobs": {"command": "x"}, "build": {"command": "x"}}}, env={}
        )
        self.catalog = Catalog(self.config.naming)
        self.supervisor = Supervisor(self.config, self.catalog)
        for alias in self.config.servers:
            self.put_server(alias)
        self.servers = AllServers(self.supervisor, self.catalog)
        self.tasks = Tasks(self.servers, lambda: 8000, DaemonConfig)
        self.watches = TaskWatches(self.tasks, self.servers)
        for alias in self.config.servers:
            self.start(alias)

    def put_server(self, alias: str) -> ServerParts:
        """The parts of ``alias``, as a (re)start puts them in place: built, not run (the
        test says what a running server would)."""
        server = ServerParts(
            alias, self.config.servers[alias], self.config, self.catalog, lambda a: None
        )
        self.supervisor.servers[alias] = server
        return server

    def server(self, alias: str) -> ServerParts:
        return self.supervisor.servers[alias]

    def start(self, alias: str) -> SessionMark:
        """A new session with ``alias`` (ending the one before, as a restart does)."""
        session = Session()
        self.server(alias).upstream = session  # type: ignore[assignment]
        return session.mark

    def stop(self, alias: str) -> None:
        self.server(alias).upstream = None

    def made(self, alias: str, server_id: str, listen: Listen) -> str:
        """A task ``alias`` made for ``listen``'s agent: the agent's id for it."""
        handle = {"resultType": "task", "taskId": server_id, "status": "working"}
        session = self.servers.session_of(alias)
        made = self.tasks.record(alias, listen.owner, handle, session)
        assert isinstance(made, dict)
        task_id: str = made["taskId"]
        return task_id

    def watch(self, listen: Listen, rid: str, wanted: Any, sight: Sight | None = None) -> list[str]:
        return self.watches.watch(
            listen.owner, (id(listen), rid), wanted, listen.send, None, lambda: sight
        )

    def tell(self, alias: str, news: dict[str, Any] | bytes) -> None:
        """``alias`` sends ``notifications/tasks`` with ``news``, as its runner hands it on."""
        body = news if isinstance(news, bytes) else json.dumps(news).encode()
        on_task = self.server(alias).prompt_resources.on_task
        assert on_task is not None  # hooked once a task of the server is watched
        on_task(alias, Raw(body))

    def watched(self, alias: str) -> set[str]:
        """The server's ids of the tasks mcpd asks ``alias`` to tell of."""
        return set(self.server(alias).prompt_resources.watched_tasks)


@pytest.fixture
async def world() -> World:
    # In trio: a runner reads its clock when built.
    return World()


async def test_a_listen_watches_only_its_agents_own_tasks(world: World) -> None:
    mine, theirs = Listen(), Listen()
    own = world.made("jobs", "t-1", mine)
    other = world.made("jobs", "t-2", theirs)
    wanted = [own, other, "jobs:t-9", "no-colon", 7, None]
    assert world.watch(mine, "L1", wanted) == [own]
    assert world.watched("jobs") == {"t-1"}
    # Not a list of ids: nothing watched, nothing asked of the server.
    assert world.watch(theirs, "L2", {"taskIds": other}) == []
    assert world.watched("jobs") == {"t-1"}


async def test_news_of_a_watched_task_reaches_its_listen_under_the_agents_id(world: World) -> None:
    agent = Listen()
    task_id = world.made("jobs", "t-1", agent)
    world.watch(agent, "L1", [task_id])
    world.tell("jobs", {"taskId": "t-1", "status": "working", "statusMessage": "half way"})
    (news,) = agent.news()
    assert news["taskId"] == "jobs:t-1"
    assert news["status"] == "working" and news["statusMessage"] == "half way"
    assert news["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L1"


async def test_news_of_the_same_id_at_another_server_or_of_no_task_reaches_no_one(
    world: World,
) -> None:
    agent = Listen()
    world.watch(agent, "L1", [world.made("jobs", "t-1", agent)])
    world.watch(agent, "L2", [world.made("build", "t-2", agent)])
    world.tell("build", {"taskId": "t-1", "status": "completed"})
    world.tell("jobs", {"status": "completed"})
    world.tell("jobs", {"taskId": 1, "status": "completed"})
    world.tell("jobs", b"[not json")
    world.tell("jobs", b'"t-1"')
    assert agent.news() == []


async def test_a_result_in_the_news_reaches_the_listen(world: World) -> None:
    agent = Listen()
    world.watch(agent, "L1", [world.made("jobs", "t-1", agent)])
    done = {"content": [{"type": "text", "text": "built"}], "isError": False}
    world.tell("jobs", {"taskId": "t-1", "status": "completed", "result": done})
    (news,) = agent.news()
    assert news["status"] == "completed"
    assert news["result"]["content"] == [{"type": "text", "text": "built"}]


async def test_the_server_watches_a_task_while_any_listen_does(world: World) -> None:
    agent = Listen()
    task_id = world.made("jobs", "t-1", agent)
    world.watch(agent, "L1", [task_id])
    world.watch(agent, "L2", [task_id])
    world.watches.unwatch((id(agent), "L1"))
    assert world.watched("jobs") == {"t-1"}
    world.tell("jobs", {"taskId": "t-1", "status": "working"})
    assert [n["_meta"]["io.modelcontextprotocol/subscriptionId"] for n in agent.news()] == ["L2"]
    world.watches.unwatch((id(agent), "L2"))
    world.watches.unwatch((id(agent), "L2"))  # again: nothing more to let go
    assert world.watched("jobs") == set()


async def test_a_session_ending_tells_each_listen_its_task_ended_and_lets_it_go(
    world: World,
) -> None:
    agent, other = Listen(), Listen()
    task_id = world.made("jobs", "t-1", agent)
    world.watch(agent, "L1", [task_id])
    world.watch(other, "L9", [world.made("build", "t-1", other)])
    world.stop("jobs")
    (ended,) = agent.news()
    assert ended["taskId"] == task_id and ended["status"] == "completed"
    assert ended["result"]["isError"] is True
    assert (
        "mcpd's session with the tool server 'jobs' ended" in ended["result"]["content"][0]["text"]
    )
    assert ended["result"]["_meta"]["mcpd/task"] == {"server": "jobs", "ended": "session"}
    assert other.news() == []  # another server's task of the same id goes on
    # A server started again may give the same id to a new task: its news is not this one's.
    world.start("jobs")
    world.server("jobs").prompt_resources.watch_task("t-1", True)
    world.tell("jobs", {"taskId": "t-1", "status": "completed"})
    assert len(agent.news()) == 1


async def test_a_task_of_an_ended_session_is_not_watched(world: World) -> None:
    agent = Listen()
    task_id = world.made("jobs", "t-1", agent)
    world.start("jobs")
    assert world.watch(agent, "L1", [task_id]) == []
    assert world.watched("jobs") == set()


async def test_a_task_whose_server_the_profile_no_longer_shows_is_told_ended_at_its_news(
    world: World,
) -> None:
    agent = Listen()
    task_id = world.made("jobs", "t-1", agent)
    sight = Shows("jobs", "build")
    assert world.watch(agent, "L1", [task_id], sight) == [task_id]
    sight.aliases.discard("jobs")  # a reload took the server out of the profile
    world.tell("jobs", {"taskId": "t-1", "status": "completed", "result": {"content": []}})
    (ended,) = agent.news()
    assert ended["result"]["_meta"]["mcpd/task"] == {"server": "jobs", "ended": "profile"}
    assert "not in this agent's profile any more" in ended["result"]["content"][0]["text"]
    assert world.watched("jobs") == set()
    world.tell("jobs", {"taskId": "t-1", "status": "completed"})
    assert len(agent.news()) == 1


async def test_news_from_a_runner_put_in_place_before_its_old_session_was_said_to_end(
    world: World,
) -> None:
    """A runner started anew whose server gives the old task's id to a new one: its
    news is not the old task's, whether or not the old session's end was heard yet."""
    agent = Listen()
    world.watch(agent, "L1", [world.made("jobs", "t-1", agent)])
    world.put_server("jobs")
    world.start("jobs")
    world.servers.changed()
    world.servers.watch_task("jobs", "t-1", True)
    world.tell("jobs", {"taskId": "t-1", "status": "completed"})
    assert agent.news() == []
