"""Who may not decide whose call: what /proc says of a process (also one whose program
chose a name to confuse the reading), a decider's lineage and session, and an agent's
kin, which a decider that is, descends from or sits beside it is refused by, and kept
after the agent is gone while one of its processes lives. Sessions
are made here (``start_new_session``): the tests' own may read as 0."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcpd.policy.kin import (
    AgentKin,
    Decider,
    Departed,
    Process,
    agent_tie,
    decider_of,
    is_bridge_command,
    kin_of,
    parent_of,
    session_of,
    tcp_deciders,
    tcp_kin,
    unknown,
)
from tests.support.procs import cat_named, reading_stdin
from tests.support.tcp_client import held_by_a_child

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
        assert kin_of(child.pid).sessions == {child.pid}


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


# -- a bridge and its host --


@pytest.mark.parametrize(
    ("argv", "bridge"),
    [
        (["mcpd", "bridge"], True),
        (["/home/u/.local/bin/mcpd", "bridge", "--profile", "claude-code"], True),
        (["/usr/bin/python3", "/opt/mcpd/bin/mcpd", "bridge"], True),
        (["python3", "-I", "-m", "mcpd", "bridge", "--socket", "/run/mcpd.sock"], True),
        (["mcpd", "approvals", "approve", "bridge"], False),
        (["mcpd"], False),
        (["sh", "-c", "mcpd bridge"], False),
        (["mcpd-bridge"], False),
        ([], False),
    ],
)
def test_a_bridge_is_told_by_its_command_line(argv: list[str], bridge: bool) -> None:
    assert is_bridge_command(argv) is bridge


def test_the_host_that_started_a_bridge_is_its_kin_too() -> None:
    """What started ``mcpd bridge`` (here, this test) and whatever it starts may not
    decide the bridge's calls; a process that only says it is a bridge adds its own
    parent to those refused, and gains nothing."""
    wait = "import sys; sys.stdin.read()"
    bridge = subprocess.Popen([sys.executable, "-c", wait, "mcpd", "bridge"], stdin=subprocess.PIPE)
    plain = subprocess.Popen([sys.executable, "-c", wait], stdin=subprocess.PIPE)
    try:
        kin = kin_of(bridge.pid)
        assert kin.hosts[0] == process_of(os.getpid())
        tool = Decider((Process(1_000_001), *decider_of(os.getpid()).lineage), session=None)
        assert kin.tie(tool) == ("host", os.getpid())
        assert kin_of(plain.pid).hosts == ()
        assert kin_of(plain.pid).tie(tool) is None
    finally:
        for child in (bridge, plain):
            child.communicate(b"")


# Each level prints its pid and starts the next, the last as ``mcpd bridge`` would be
# started, and it waits for stdin to close.
_CHAIN = """
import os, subprocess, sys
depth = int(sys.argv[1])
print(depth, os.getpid(), flush=True)
if depth:
    bridge = ["mcpd", "bridge"] if depth == 1 else []
    subprocess.run([sys.executable, "-c", sys.argv[2], str(depth - 1), sys.argv[2], *bridge])
else:
    sys.stdin.read()
"""


def test_a_host_that_starts_its_bridge_through_a_launcher_is_its_kin_too() -> None:
    """A host that starts the bridge through a launcher that forks (``uv run``, ``sh
    -c``) is kin as the launcher is, so its shell tool is refused even out of its
    session (``setsid``); the session's leader, the terminal's shell, is not."""
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
        leader, host, launcher, bridge = pid[3], pid[2], pid[1], pid[0]
        kin = kin_of(bridge)
        assert [h.pid for h in kin.hosts] == [launcher, host]
        tool = Decider((Process(1_000_001), process_of(host), process_of(leader)), session=None)
        assert kin.tie(tool) == ("host", host)
        terminal = Decider((Process(1_000_002), process_of(leader)), session=None)
        assert kin.tie(terminal) is None
    finally:
        chain.communicate(b"")


# -- an agent on the TCP endpoint --


async def test_an_agent_on_tcp_is_the_process_that_holds_its_connection() -> None:
    async with held_by_a_child() as (conn, child):
        kin = tcp_kin(conn, time.monotonic() + 5)
        assert kin.agents == (process_of(child.pid),)
        assert kin.sessions == {child.pid} and kin.uid == os.getuid()
        assert kin.unknown is None
        assert kin.tie(decider_of(child.pid)) == ("agent", child.pid)
        assert kin.tie(Decider((Process(1_000_001),), session=child.pid)) == ("session", None)
        assert kin.tie(decider_of(os.getpid())) is None


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
    kin = unknown("not found", 1000)
    assert kin.tie(Decider((Process(7),), uid=1000)) == ("unknown", None)
    assert kin.tie(Decider((Process(7),), uid=0)) is None
    assert kin.tie(Decider((Process(7),), uid=1000, page=True)) is None
    anyone = unknown("not found", None)
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
    assert agent_tie(beside, [unknown("gone", None), second]) == ("agent", 30)


def test_the_tie_among_many_agents_is_each_agents_own_rule_taken_in_order() -> None:
    """Over many made-up agents and deciders sharing pids, sessions and unread start
    times: what ``agent_tie`` finds is what asking each agent in turn finds."""
    rng = random.Random(7)

    def process() -> Process:
        return Process(rng.randrange(1, 12), rng.choice((None, 1, 2)))

    def processes(most: int) -> tuple[Process, ...]:
        return tuple(process() for _ in range(rng.randrange(most + 1)))

    for _ in range(3000):
        agents = [
            unknown("gone", rng.choice((None, 1000)))
            if rng.random() < 0.1
            else AgentKin(
                agents=processes(2),
                hosts=processes(3),
                sessions=frozenset(rng.sample(range(1, 6), rng.randrange(3))),
            )
            for _ in range(rng.randrange(5))
        ]
        decider = Decider(processes(6), rng.choice((None, 0, 1, 2, 3, 4, 5)), 1000)
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
    departed.left(unknown("not found", None))
    assert departed.living() == [kin]
    assert kin.tie(Decider((host,))) == ("host", child.pid)
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


def test_the_oldest_gone_agent_is_dropped_first_past_the_limit() -> None:
    departed = Departed(limit=2)
    kept = [AgentKin(agents=(process_of(os.getpid()),), sessions=frozenset({n})) for n in (1, 2, 3)]
    for kin in kept:
        departed.left(kin)
    assert departed.living() == kept[1:]
