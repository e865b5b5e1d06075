"""The ``mcpd/approvals/...`` methods called directly over the calls waiting for a
person: who may list, show, decide and watch them (the daemon's user and root, on its
Unix socket, and never the agent that made the call nor another agent connected),
what a decision carries to the call, what showing one gives of its arguments, and how
long a watch waits."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from msgspec import Raw

from mcpd.agents.entry.peers import Peer, is_owner
from mcpd.agents.own_methods.approval_methods import HANDLERS, MAX_WAIT
from mcpd.policy.agent import AgentInfo, user_name
from mcpd.policy.deciders.kin import AgentKin, Process, kin_of
from mcpd.policy.shown.showing import shown_arguments
from mcpd.policy.waiting.approvals import ApprovalRequest, Approvals, Verdict
from protocol.jsonrpc import messages as rpc

# The agent is this process (and, where its session matters, a process of its own).
AGENT_PID = os.getpid()
ME = os.getuid()
OWNER = Peer(pid=10, uid=ME, gid=0, lineage=(Process(10), Process(1)))
STRANGER = Peer(pid=12, uid=ME + 4242, gid=0)
A_SERVERS_PROCESS = Peer(pid=13, uid=ME, gid=0, server="notes")
THE_AGENT = Peer(pid=AGENT_PID, uid=ME, gid=0, lineage=(Process(AGENT_PID), Process(1)))
STARTED_BY_THE_AGENT = Peer(
    pid=77, uid=ME, gid=0, lineage=(Process(77), Process(AGENT_PID), Process(1)), session=5
)


class Conn:
    def __init__(self, peer: Peer | None) -> None:
        self.peer = peer

    def may_control(self) -> bool:
        return self.peer is not None and is_owner(self.peer)


class Api:
    def __init__(self, agents: tuple[AgentKin, ...] = ()) -> None:
        self.control = self
        self.approvals = Approvals()
        self.agents = agents  # who is kin to each agent connected

    async def agents_kin(self) -> list[AgentKin]:
        return list(self.agents)


async def call(api: Api, method: str, params: Any = None, peer: Peer | None = OWNER) -> Any:
    raw = None if params is None else Raw(msgspec.json.encode(params))
    return await HANDLERS[method](api, Conn(peer), rpc.Request(1, method, raw), None)


@asynccontextmanager
async def one_waiting(
    api: Api, agent: int = AGENT_PID, arguments: bytes = b'{"force": true}'
) -> AsyncIterator[list[Verdict]]:
    """A call of the agent's (process ``agent``) waiting for a person;
    its verdict, once decided, in the list yielded."""
    verdicts: list[Verdict] = []
    shown = shown_arguments(arguments)
    request = ApprovalRequest(
        agent=AgentInfo(uid=ME, pid=agent, connection="c1"),
        kin=kin_of(agent),
        tool="mcp__git__push",
        server="git",
        original="push",
        arguments=shown.glance.text,
        shortened=shown.glance.shortened,
        keys_left_out=shown.glance.keys_left_out,
        whole=shown.whole,
    )

    async def ask() -> None:
        verdicts.append(await api.approvals.ask(request, 600))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
            yield verdicts
            nursery.cancel_scope.cancel()


def the_id(api: Api) -> str:
    [waiting] = api.approvals.list()
    return waiting.id


# -- who may --


@pytest.mark.parametrize("method", sorted(HANDLERS))
@pytest.mark.parametrize(
    "peer",
    [None, STRANGER, A_SERVERS_PROCESS],
    ids=["http-endpoint", "another-user", "a-servers-process"],
)
async def test_only_the_daemons_user_on_its_socket_may_see_or_decide(
    method: str, peer: Peer | None
) -> None:
    api = Api()
    async with one_waiting(api) as verdicts:
        params = {"id": the_id(api), "approve": True} if method.endswith("decide") else {}
        with pytest.raises(rpc.RPCError) as refused:
            await call(api, method, params, peer)
        assert refused.value.code == -32000 and "on its Unix socket" in refused.value.message
        assert len(api.approvals.list()) == 1 and verdicts == []


@pytest.fixture
def agent_in_a_session() -> Iterator[int]:
    """An agent leading a session of its own, as a host started in a terminal does.
    (The tests' own session may be 0, the mark of one begun outside this PID
    namespace, which names no session and excludes nobody.)"""
    agent = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        yield agent.pid
    finally:
        agent.kill()
        agent.wait()


@pytest.mark.parametrize("peer", [THE_AGENT, STARTED_BY_THE_AGENT], ids=["itself", "child"])
async def test_the_agent_that_made_the_call_cannot_decide_it(peer: Peer) -> None:
    api = Api()
    async with one_waiting(api) as verdicts:
        with pytest.raises(rpc.RPCError) as refused:
            await call(api, "mcpd/approvals/decide", {"id": the_id(api), "approve": True}, peer)
        assert refused.value.code == rpc.INVALID_PARAMS
        assert "cannot decide it" in refused.value.message
        assert len(api.approvals.list()) == 1 and verdicts == []


async def test_a_process_in_the_agents_session_cannot_decide_its_call(
    agent_in_a_session: int,
) -> None:
    api = Api()
    beside = Peer(
        pid=78, uid=ME, gid=0, lineage=(Process(78), Process(1)), session=agent_in_a_session
    )
    async with one_waiting(api, agent_in_a_session) as verdicts:
        with pytest.raises(rpc.RPCError) as refused:
            await call(api, "mcpd/approvals/decide", {"id": the_id(api), "approve": True}, beside)
        assert refused.value.code == rpc.INVALID_PARAMS
        assert "same session" in refused.value.message
        assert len(api.approvals.list()) == 1 and verdicts == []


async def test_a_process_another_connected_agent_started_cannot_decide_a_call() -> None:
    other = 4242  # an agent connected to mcpd besides the one whose call waits
    api = Api((kin_of(AGENT_PID), AgentKin(agents=(Process(other),))))
    started = Peer(pid=79, uid=ME, gid=0, lineage=(Process(79), Process(other), Process(1)))
    async with one_waiting(api) as verdicts:
        with pytest.raises(rpc.RPCError) as refused:
            await call(api, "mcpd/approvals/decide", {"id": the_id(api), "approve": True}, started)
        assert refused.value.code == -32000
        assert f"is an agent connected to mcpd (pid {other}), or was started by one" in (
            refused.value.message
        )
        assert len(api.approvals.list()) == 1 and verdicts == []


# -- list and decide --


async def test_the_owner_lists_what_waits_and_its_decision_reaches_the_call() -> None:
    api = Api()
    async with one_waiting(api) as verdicts:
        listed = await call(api, "mcpd/approvals/list")
        [waiting] = listed.approvals
        assert (waiting.tool, waiting.arguments) == ("mcp__git__push", '{"force":true}')
        assert listed.version == api.approvals.version
        params = {"id": waiting.id, "approve": False, "reason": "  not on main  "}
        decided = await call(api, "mcpd/approvals/decide", params)
        by = f"uid {ME} ({user_name(ME)})"
        assert (decided.approved, decided.by) == (False, by)
        await trio.testing.wait_all_tasks_blocked()
        assert verdicts == [Verdict("denied", by, "not on main")]
        assert (await call(api, "mcpd/approvals/list")).approvals == []


async def test_showing_a_call_gives_its_arguments_whole_where_the_list_shortens_them() -> None:
    api = Api()
    body = "Small wording fix. " * 480
    raw = json.dumps({"title": "Fix typo", "body": body, "repo": "acme/PROD", "force": True})
    async with one_waiting(api, arguments=raw.encode()) as verdicts:
        [listed] = (await call(api, "mcpd/approvals/list")).approvals
        assert listed.shortened and listed.keys_left_out == 0
        assert body not in listed.arguments and '"repo":"acme/PROD","force":true}' in (
            listed.arguments
        )
        shown = await call(api, "mcpd/approvals/show", {"id": listed.id})
        assert shown.approval == listed
        assert json.loads(shown.arguments) == json.loads(raw)
        assert verdicts == []  # showing decides nothing
        await call(api, "mcpd/approvals/decide", {"id": listed.id, "approve": False})
        with pytest.raises(rpc.RPCError) as refused:
            await call(api, "mcpd/approvals/show", {"id": listed.id})
        assert refused.value.code == rpc.INVALID_PARAMS
        assert "no call waits for approval" in refused.value.message


@pytest.mark.parametrize(
    ("reason", "kept"),
    [
        (None, None),
        ("", None),
        ("   \n", None),
        ("x" * 5000, "x" * 500 + "… (and 4500 more characters)"),
    ],
    ids=["none", "empty", "blank", "long"],
)
async def test_a_reason_is_kept_trimmed_and_cut_short(reason: str | None, kept: str | None) -> None:
    api = Api()
    async with one_waiting(api) as verdicts:
        params = {"id": the_id(api), "approve": True, "reason": reason}
        await call(api, "mcpd/approvals/decide", params)
        await trio.testing.wait_all_tasks_blocked()
        [verdict] = verdicts
        assert verdict.outcome == "approved" and verdict.reason == kept


async def test_a_decision_for_a_call_that_waits_no_more_says_so() -> None:
    api = Api()
    async with one_waiting(api):
        pid = the_id(api)
        await call(api, "mcpd/approvals/decide", {"id": pid, "approve": True})
        for unknown in (pid, "nope", "x" * 10_000):
            with pytest.raises(rpc.RPCError) as refused:
                await call(api, "mcpd/approvals/decide", {"id": unknown, "approve": False})
            assert refused.value.code == rpc.INVALID_PARAMS
            assert "no call waits for approval" in refused.value.message


@pytest.mark.parametrize(
    "params",
    [{}, {"id": "a"}, {"id": 5, "approve": True}, {"id": "a", "approve": "yes"}],
)
async def test_a_malformed_decision_is_refused(params: dict[str, Any]) -> None:
    api = Api()
    async with one_waiting(api) as verdicts:
        with pytest.raises(rpc.InvalidParams):
            await call(api, "mcpd/approvals/decide", params)
        assert verdicts == []


# -- watch --


async def test_a_watch_behind_the_version_answers_at_once() -> None:
    api = Api()
    async with one_waiting(api):
        with trio.fail_after(5):
            got = await call(api, "mcpd/approvals/watch", {"after": 0})
        assert got.version >= 1 and len(got.approvals) == 1


async def test_a_watch_answers_once_the_list_changes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    api = Api()
    answers: list[dict[str, Any]] = []

    async def watch() -> None:
        answers.append(await call(api, "mcpd/approvals/watch", {"after": api.approvals.version}))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        await trio.testing.wait_all_tasks_blocked()
        assert answers == []
        async with one_waiting(api):
            await trio.testing.wait_all_tasks_blocked()
            [answer] = answers
            assert len(answer.approvals) == 1


@pytest.mark.parametrize(
    ("wait", "waited"),
    [(None, MAX_WAIT), (5, 5.0), (0, 0.0), (-30, 0.0), (10**9, MAX_WAIT), (1e300, MAX_WAIT)],
)
async def test_a_watch_waits_as_asked_and_a_minute_at_most(
    autojump_clock: trio.testing.MockClock, wait: float | None, waited: float
) -> None:
    api = Api()
    params: dict[str, Any] = {"after": api.approvals.version}
    if wait is not None:
        params["wait"] = wait
    start = trio.current_time()
    got = await call(api, "mcpd/approvals/watch", params)
    assert trio.current_time() - start == waited
    assert msgspec.to_builtins(got) == {"approvals": [], "version": api.approvals.version}
