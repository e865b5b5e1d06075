"""Agents gone whose processes live on, as the list kept of them fills: those one host
left are kept as one, a lockout lifts as soon as there is room, and one user's agents
keep from deciding only who may descend from a process of that user. Real processes,
in sessions of their own (``start_new_session``)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest

from mcpd.policy.deciders import kin
from mcpd.policy.deciders.departed import Departed
from mcpd.policy.deciders.kin import AgentKin, Decider, Process, decider_of
from mcpd.policy.deciders.kinship import Kinship
from tests.support.parts.kinship import agent_tie

GONE = 2**22 + 12345  # above any pid the kernel hands out
BRIDGES = 2000
PERSON = Decider((Process(GONE + 1),), session=GONE + 1, uid=0, uids=frozenset({0}))


class Running:
    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        self.child = child
        self.process = decider_of(child.pid, limit=1).lineage[0]
        self.session = child.pid

    def end(self) -> None:
        self.child.communicate(b"")


@contextmanager
def running(count: int) -> Iterator[list[Running]]:
    """``count`` processes, each in a session of its own, until the block ends."""
    with ExitStack() as stack:
        started = []
        for _ in range(count):
            child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                     stdin=subprocess.PIPE, start_new_session=True)  # fmt: skip
            stack.callback(child.communicate, b"")
            started.append(Running(child))
        yield started


def agent(process: Running, uid: int | None = None, host: Running | None = None) -> AgentKin:
    hosts = () if host is None else (host.process,)
    sessions = {process.session} if host is None else {host.session}
    return AgentKin(agents=(process.process,), hosts=hosts, sessions=frozenset(sessions), uid=uid)


def test_the_bridges_one_host_starts_one_after_another_are_kept_as_one() -> None:
    """Each bridge still runs as its disconnect is seen: bridges of the same host, in
    its session, are one agent gone, and do not fill the list."""
    departed = Departed(limit=2)
    with running(4) as (host, *bridges):
        for bridge in bridges:
            departed.left(agent(bridge, 1000, host=host))
        [kept] = departed.living()
        assert kept.gone and kept.hosts == (host.process,)
        assert agent_tie(PERSON, departed.living()) is None
        for bridge in bridges:
            bridge.end()
        [kept] = departed.living()  # the host lives on
        assert kept.agents == () and kept.hosts == (host.process,)


def test_a_lockout_lifts_as_soon_as_one_kept_ends_and_those_not_kept_are_kept_then() -> None:
    departed = Departed(limit=1)
    with running(3) as (first, second, third):
        departed.left(agent(first, 1000))
        departed.left(agent(second, 1000))
        departed.left(agent(third, 1000))
        *_, crowd = departed.living()
        assert crowd.crowd is not None
        mine = Decider((Process(GONE),), uid=1000, uids=frozenset({1000}))
        assert agent_tie(mine, departed.living()) == ("crowd", None)
        first.end()
        assert [k.crowd for k in departed.living()] == [None]
        [kept] = departed.living()  # the two not kept, as one
        assert {p.pid for p in kept.agents} == {second.child.pid, third.child.pid}
        for one in (second, third):
            assert agent_tie(Decider((one.process,)), departed.living()) == ("agent", one.child.pid)
        assert agent_tie(mine, departed.living()) is None


def test_a_lockout_lifts_once_those_not_kept_end() -> None:
    departed = Departed(limit=1)
    with running(2) as (first, second):
        departed.left(agent(first, 1000))
        departed.left(agent(second, 1000))
        assert departed.living()[-1].crowd is not None
        second.end()
        assert [k.agents for k in departed.living()] == [(first.process,)]


def test_one_users_agents_crowding_the_list_keep_only_deciders_of_that_user() -> None:
    """Another user's agents (allowed on the socket) fill the list: root still decides
    from a terminal of its own, but not from that user's shell (``sudo``)."""
    departed = Departed(limit=1)
    with running(2) as (first, second):
        departed.left(agent(first, 1005))
        departed.left(agent(second, 1005))
        sudo = Decider((Process(GONE),), uid=0, uids=frozenset({0, 1005}))
        theirs = Decider((Process(GONE),), uid=1005, uids=frozenset({1005}))
        deep = Decider((Process(GONE),), uid=0, uids=frozenset({0}), cut=True)
        kinship = Kinship(departed.living())
        assert kinship.tie(PERSON) is None
        for tied in (sudo, theirs, deep):
            found = kinship.found(tied)
            assert found is not None and found.tie == "crowd", tied
        assert found.kin.crowd is not None
        said = found.kin.crowd
        assert "uid 1005" in said and "restarts" in said, said
        assert f"sessions {first.session}" in said and str(second.session) in said, said


@contextmanager
def reads_counted() -> Iterator[list[int]]:
    """The pids whose /proc entry ``policy.deciders.kin`` reads until the block ends."""
    read: list[int] = []
    real = kin._stat

    def counting(pid: int) -> list[bytes] | None:
        read.append(pid)
        return real(pid)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kin, "_stat", counting)
        yield read


def test_an_agent_leaving_reads_nothing_of_the_processes_that_were_not_its_own() -> None:
    """However many processes run, an agent that leaves costs no look at them: what of
    those gone still runs is read when someone next decides, and found then."""
    departed = Departed(limit=2)
    with running(3) as processes, reads_counted() as read:
        for one in processes:
            departed.left(agent(one, 1000))
        assert set(read) <= {one.child.pid for one in processes}, read
        first, second, crowd = departed.living()
        assert [first.agents, second.agents] == [(p.process,) for p in processes[:2]]
        assert crowd.crowd is not None and crowd.uid == 1000
        assert set(read) > {one.child.pid for one in processes}  # the machine's, now


def test_a_host_whose_bridges_leave_by_the_thousand_between_decisions_costs_no_more_each() -> None:
    """Each bridge of one host, in its session, is kept with the others; those that
    ended are let go as they pile up, each read a bounded number of times."""
    departed = Departed(limit=2)
    with running(1) as (host,), reads_counted() as read:
        for n in range(BRIDGES):
            bridge = AgentKin(
                agents=(Process(GONE + n, 1),),
                hosts=(host.process,),
                sessions=frozenset({host.session}),
                uid=1000,
            )
            departed.left(bridge)
        assert len(read) < 3 * BRIDGES, len(read)
        [kept] = departed.living()
        assert kept.agents == () and kept.hosts == (host.process,)
