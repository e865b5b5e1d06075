"""Who may not decide whose call: what /proc says of a process (also one whose program
chose a name to confuse the reading), a decider's lineage and session, and an agent's
kin, which a decider that is, descends from or sits beside it is refused by, and kept
after the agent is gone while one of its processes lives. Sessions
are made here (``start_new_session``): the tests' own may read as 0."""

from __future__ import annotations

import os
import pty
import random
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from mcpd.policy.deciders.departed import Departed
from mcpd.policy.deciders.kin import (
    AgentKin,
    Decider,
    Process,
    decider_of,
    kin_of,
    parent_of,
    session_of,
    tcp_deciders,
    tcp_kin,
    unknown_kin,
)
from tests.support.clients.tcp_client import held_by_a_child
from tests.support.parts.kinship import agent_tie
from tests.support.system.procs import cat_named, reading_stdin

GONE = 2**22 + 12345  # above any pid the kernel hands out


def process_of(pid: int) -> Process:
    """``pid`` and its start time, as a decider's lineage records it."""
    return decider_of(pid, limit=1).lineage[0]


def pids(decider: Decider) -> tuple[int, ...]:
    return tuple(p.pid for p in decider.lineage)


# -- what /proc says --


def test_a_program_named_with_parentheses_and_spaces_does_not_shift_its_stat_fields(
    tmp_path: Path,
) -> None:
    # /proc/PID/stat puts the name in parentheses; a name that closes them early and
    # adds numbers must not pass for the process's parent or session.
    program = cat_named(tmp_path, "x) R 1 1 1 (y")
    with reading_stdin(program, new_session=True) as child:
        assert parent_of(child.pid) == os.getpid()
        assert session_of(child.pid) == child.pid
        assert pids(decider_of(child.pid))[:2] == (child.pid, os.getpid())
        assert child.pid in kin_of(child.pid).sessions


def test_a_process_that_is_gone_says_nothing() -> None:
    assert parent_of(GONE) is None
    assert session_of(GONE) is None
    assert decider_of(GONE) == Decider((Process(GONE),), None)
    assert kin_of(GONE) == AgentKin(agents=(Process(GONE),))


def test_the_lineage_climbs_to_init_and_stops_at_its_limit() -> None:
    lineage = pids(decider_of(os.getpid()))
    assert lineage[0] == os.getpid() and lineage[1] == os.getppid()
    assert 1 not in lineage and 0 not in lineage
    assert pids(decider_of(os.getpid(), limit=1)) == (os.getpid(),)


def test_a_process_is_known_by_its_start_time_too() -> None:
    me = decider_of(os.getpid()).lineage[0]
    assert me.started is not None and me.started > 0
    assert kin_of(os.getpid()).agents == (me,)


# -- who may decide --


def test_the_agent_and_what_it_started_may_not_decide_its_call() -> None:
    agent = AgentKin(agents=(Process(200, 5),))
    assert agent.tie(Decider((Process(200, 5),))) == ("agent", 200)  # itself
    assert agent.tie(Decider((Process(300, 9), Process(200, 5), Process(100, 1)))) == (
        "agent",
        200,
    )  # a process it started
    assert agent.tie(Decider((Process(100, 1),))) is None  # what started it
    assert agent.tie(Decider((Process(400, 5),))) is None


def test_a_pid_given_to_another_process_since_is_not_the_agent() -> None:
    """The agent exited and its pid names a later process: one that descends from that
    process is not the agent's. A start time /proc did not give matches by pid."""
    agent = AgentKin(agents=(Process(200, 5),))
    assert agent.tie(Decider((Process(300, 9), Process(200, 70)))) is None
    assert agent.tie(Decider((Process(300, 9), Process(200)))) == ("agent", 200)
    assert AgentKin(agents=(Process(200),)).tie(Decider((Process(200, 70),))) == ("agent", 200)


def test_a_decider_in_the_agents_session_is_refused_one_apart_is_not() -> None:
    with reading_stdin(sys.executable, new_session=True) as agent:
        kin = kin_of(agent.pid)
        assert kin.tie(Decider((Process(1_000_001),), session=agent.pid)) == ("session", None)
        assert kin.tie(Decider((Process(1_000_001),), session=agent.pid + 1)) is None


@pytest.mark.parametrize("session", [0, None])
def test_an_unknown_session_matches_no_agent(session: int | None) -> None:
    # 0 (begun outside the PID namespace) or unread: it says nothing of who is beside whom,
    # not even about an agent whose session reads the same.
    with reading_stdin(sys.executable) as agent:
        kin = kin_of(agent.pid)
        assert kin.tie(Decider((Process(1_000_001),), session=session)) is None
        unread = AgentKin(agents=(Process(agent.pid),), sessions=frozenset())
        assert unread.tie(Decider((Process(1_000_001),), session=session_of(agent.pid))) is None


def test_the_session_is_the_one_read_while_the_agent_was_there() -> None:
    """Read when the agent connected, its session stays its kin once it has exited:
    the children it left in that session are still refused."""
    with reading_stdin(sys.executable, new_session=True) as agent:
        kin = kin_of(agent.pid)
    assert session_of(agent.pid) is None  # gone, and reaped
    assert kin.tie(Decider((Process(1_000_001),), session=agent.pid)) == ("session", None)


# -- what started an agent --


def test_what_started_an_agent_is_its_kin_too_whatever_it_runs() -> None:
    """What started the agent's process (here, this test: a host, whose relay is the
    agent mcpd sees) and whatever it starts may not decide the agent's calls."""
    agent = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    try:
        kin = kin_of(agent.pid)
        assert kin.hosts[0] == process_of(os.getpid())
        tool = Decider((Process(1_000_001), *decider_of(os.getpid()).lineage), session=None)
        assert kin.tie(tool) == ("host", os.getpid())
    finally:
        agent.communicate(b"")


# Each level prints its pid and starts the next, and the last waits for stdin to close.
_CHAIN = """
import os, subprocess, sys
depth = int(sys.argv[1])
print(depth, os.getpid(), flush=True)
if depth:
    subprocess.run([sys.executable, "-c", sys.argv[2], str(depth - 1), sys.argv[2]])
else:
    sys.stdin.read()
"""


def test_what_started_an_agent_through_launchers_set_apart_is_its_kin_too() -> None:
    """A host that starts its relay through launchers that fork, in a session of their
    own (``setsid sh -c``), is kin as the launchers are, and so is the first process
    above the session (here, this test) with its session: the host's shell tool is
    refused even out of its session."""
    chain = subprocess.Popen(
        [sys.executable, "-c", _CHAIN, "3", _CHAIN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert chain.stdout is not None
    try:
        pid = {}
        for _ in range(4):
            depth, number = chain.stdout.readline().split()
            pid[int(depth)] = int(number)
        leader, launcher, relay, agent = pid[3], pid[2], pid[1], pid[0]
        kin = kin_of(agent)
        assert [h.pid for h in kin.hosts] == [relay, launcher, leader, os.getpid()]
        assert kin.sessions == {s for s in (leader, session_of(os.getpid())) if s}
        tool = Decider((Process(1_000_001), process_of(os.getpid())), session=None)
        assert kin.tie(tool) == ("host", os.getpid())
    finally:
        chain.communicate(b"")


def test_in_a_terminals_session_what_started_its_shell_is_not_the_agents() -> None:
    """An agent in a terminal's session: its climb ends at the session's leader, the
    terminal's shell, for what started that shell (a terminal emulator, tmux, sshd)
    starts the person's other terminals too."""
    child, terminal = pty.fork()
    if child == 0:
        os.execv(sys.executable, [sys.executable, "-c", _CHAIN, "1", _CHAIN])
    try:
        said = b""
        while said.count(b"\n") < 2:
            said += os.read(terminal, 1024)
        pid = dict(map(int, row.split()) for row in said.decode().splitlines()[:2])
        kin = kin_of(pid[0])
        assert [h.pid for h in kin.hosts] == [pid[1]]
        assert kin.tie(Decider((Process(1_000_001), process_of(os.getpid())))) is None
    finally:
        os.write(terminal, b"\x04")
        os.waitpid(child, 0)
        os.close(terminal)


# -- an agent on the TCP endpoint --


async def test_an_agent_on_tcp_is_the_process_that_holds_its_connection() -> None:
    async with held_by_a_child() as (conn, child):
        kin = tcp_kin(conn, time.monotonic() + 5)
        assert kin.agents == (process_of(child.pid),)
        # Its own session, and the one of what started it (here, this test).
        assert child.pid in kin.sessions and kin.uid == os.getuid()
        assert kin.unknown is None
        assert kin.tie(decider_of(child.pid)) == ("agent", child.pid)
        assert kin.tie(Decider((Process(1_000_001),), session=child.pid)) == ("session", None)
        assert kin.tie(decider_of(os.getpid())) == ("host", os.getpid())  # what started it


async def test_a_look_for_an_agent_on_tcp_past_its_time_ends_and_says_so() -> None:
    """A look through /proc that takes too long ends on its own (it is not left to run
    on in its thread), the agent's process unknown and its user kept; a decider looked
    for as long is none."""
    async with held_by_a_child() as (conn, _):
        kin = tcp_kin(conn, time.monotonic() - 1)
        assert (kin.agents, kin.uid) == ((), os.getuid())
        assert kin.unknown == "looking for it in /proc took too long"
        assert tcp_deciders(conn, time.monotonic() - 1) == ()
        assert len(tcp_deciders(conn, time.monotonic() + 5)) == 1


async def test_an_agent_on_tcp_that_cannot_be_found_says_why() -> None:
    async with held_by_a_child() as (conn, child):
        assert child.stdin is not None
        await child.stdin.aclose()
        await child.wait()
        await conn.recv(1)  # its close has reached this end: no process holds the other
        kin = tcp_kin(conn, time.monotonic() + 5)
    assert kin.agents == () and kin.uid is None
    assert kin.unknown == "the kernel did not say which user holds its TCP connection"


def test_where_the_agents_process_is_unknown_no_decider_of_its_user_decides() -> None:
    """On the socket, a decider of the agent's user may be a process it started, and
    nothing tells the two apart; another user, or a person on the status page, may
    decide. Where even the user is unknown, only the page may."""
    kin = unknown_kin("not found", 1000)
    assert kin.tie(Decider((Process(7),), uid=1000)) == ("unknown", None)
    assert kin.tie(Decider((Process(7),), uid=0)) is None
    assert kin.tie(Decider((Process(7),), uid=1000, page=True)) is None
    anyone = unknown_kin("not found", None)
    assert anyone.tie(Decider((Process(7),), uid=0)) == ("unknown", None)
    assert anyone.tie(Decider((Process(7),), uid=0, page=True)) is None


def test_among_many_agents_a_decider_is_kin_to_the_first_it_is_kin_to() -> None:
    """The first agent in order that a decider is kin to decides the tie, whichever
    way it is kin: a session shared with the first agent comes before the second
    agent's own process, and within one agent its process before its host."""
    first = AgentKin(agents=(Process(10, 1),), hosts=(Process(20, 1),), sessions=frozenset({5}))
    second = AgentKin(agents=(Process(30, 1),), sessions=frozenset({6}))
    both = Decider((Process(30, 1), Process(20, 1), Process(10, 1)), session=5)
    assert agent_tie(both, [first, second]) == ("agent", 10)
    assert agent_tie(both, [second, first]) == ("agent", 30)
    beside = Decider((Process(30, 1),), session=5)
    assert agent_tie(beside, [first, second]) == ("session", None)
    assert agent_tie(Decider((Process(20, 1),), session=6), [first, second]) == ("host", 20)
    # An agent whose process is unknown ties nobody here: the next one is asked.
    assert agent_tie(beside, [unknown_kin("gone", None), second]) == ("agent", 30)


def test_the_tie_among_many_agents_is_each_agents_own_rule_taken_in_order() -> None:
    """Over many made-up agents and deciders sharing pids, sessions (their own, those
    of their lineage, those an agent leads) and unread start times: what ``agent_tie``
    finds is what asking each agent in turn finds."""
    rng = random.Random(7)

    def process() -> Process:
        return Process(rng.randrange(1, 12), rng.choice((None, 1, 2)))

    def processes(most: int) -> tuple[Process, ...]:
        return tuple(process() for _ in range(rng.randrange(most + 1)))

    def owning(kin: AgentKin) -> AgentKin:
        owned = rng.sample(sorted(kin.sessions), rng.randrange(len(kin.sessions) + 1))
        return msgspec.structs.replace(kin, owned=frozenset(owned))

    for _ in range(3000):
        agents = [
            unknown_kin("gone", rng.choice((None, 1000)))
            if rng.random() < 0.1
            else owning(
                AgentKin(
                    agents=processes(2),
                    hosts=processes(3),
                    sessions=frozenset(rng.sample(range(1, 6), rng.randrange(3))),
                )
            )
            for _ in range(rng.randrange(5))
        ]
        sessions = frozenset(rng.sample(range(1, 6), rng.randrange(3)))
        decider = Decider(
            processes(6), rng.choice((None, 0, 1, 2, 3, 4, 5)), 1000, sessions=sessions
        )
        asked = (kin.tie(decider) for kin in agents)
        expected = next((t for t in asked if t is not None and t[0] != "unknown"), None)
        assert agent_tie(decider, agents) == expected


# -- an agent gone, its processes not --


def test_a_gone_agent_is_kept_while_its_host_lives_and_forgotten_after() -> None:
    departed = Departed()
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    host = process_of(child.pid)
    kin = AgentKin(agents=(Process(GONE),), hosts=(host,))
    departed.left(kin)
    departed.left(AgentKin(agents=(Process(GONE),)))  # nothing of it lives: not kept
    departed.left(unknown_kin("not found", None))
    assert departed.living() == [AgentKin(hosts=(host,), gone=True)]
    assert departed.living()[0].tie(Decider((host,))) == ("host", child.pid)
    assert child.stdin is not None
    child.stdin.close()
    child.wait()
    assert departed.living() == []


def test_a_pid_given_to_another_process_is_not_a_gone_agents() -> None:
    me = process_of(os.getpid())
    departed = Departed()
    assert me.started is not None
    departed.left(AgentKin(agents=(Process(os.getpid(), me.started + 1),)))
    assert departed.living() == []


def test_a_gone_agent_is_kept_while_a_process_lives_in_its_session() -> None:
    """Its process and what started it are gone; a child it left in its session is
    not, and is refused until it ends."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE, start_new_session=True)  # fmt: skip
    departed = Departed()
    departed.left(AgentKin(agents=(Process(GONE),), sessions=frozenset({child.pid})))
    [kept] = departed.living()
    assert kept.tie(Decider((Process(1_000_001),), session=child.pid)) == ("session", None)
    child.communicate(b"")
    assert departed.living() == []


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE, start_new_session=True)  # fmt: skip


def test_past_the_limit_those_that_ended_go_and_while_all_live_no_one_decides() -> None:
    """An agent that starts processes by the hundred, each connecting and leaving,
    cannot push its own out: none living is forgotten, and while there is no room no
    one decides, saying why, until one kept has ended and there is room again."""
    first, second, third = sleeper(), sleeper(), sleeper()
    departed = Departed(limit=2)
    mine = AgentKin(agents=(process_of(first.pid),))
    departed.left(mine)
    departed.left(AgentKin(agents=(Process(GONE),), sessions=frozenset({second.pid})))
    second.communicate(b"")  # ended: its place is taken first
    departed.left(AgentKin(agents=(process_of(third.pid),)))
    assert [k.agents for k in departed.living()] == [mine.agents, (process_of(third.pid),)]
    assert departed.living()[0] == msgspec.structs.replace(mine, gone=True)
    departed.left(AgentKin(agents=(process_of(os.getpid()),)))  # no room for it
    *kept, crowd = departed.living()
    assert kept[0].agents == mine.agents and crowd.crowd is not None and "(2)" in crowd.crowd
    person = Decider((Process(1_000_001),), session=1_000_001, page=True)
    assert agent_tie(person, departed.living()) == ("crowd", None)
    assert crowd.tie(person) == ("crowd", None)
    first.communicate(b"")  # room again: the one not kept is kept now
    assert [k.agents for k in departed.living()] == [
        (process_of(third.pid),),
        (process_of(os.getpid()),),
    ]
    assert agent_tie(person, departed.living()) is None
    third.communicate(b"")
