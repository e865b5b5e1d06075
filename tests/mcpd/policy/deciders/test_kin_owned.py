"""A session an agent's own process or its host leads is the agent's: whatever
descends from a process in it is refused, even once that process's parent is gone and
it runs in a session of its own. A session the agent only shares (a desktop's login
session, which a person's terminals are started in too) refuses the processes in it,
not what descends from them."""

from __future__ import annotations

import os
import subprocess
import sys

from mcpd.policy.deciders.departed import Departed
from mcpd.policy.deciders.kin import AgentKin, Decider, Process, decider_of, kin_of, session_of
from mcpd.policy.deciders.kin_refusals import not_yours
from tests.support.parts.kinship import agent_tie
from tests.support.system.procs import reading_stdin

GONE = 2**22 + 12345  # above any pid the kernel hands out

# An agent (pid 10) whose host (pid 20) began session 20; the agent shares session 5
# too, led by none of them.
LED = AgentKin(
    agents=(Process(10, 1),),
    hosts=(Process(20, 1),),
    sessions=frozenset({20, 5}),
    owned=frozenset({20}),
)


def test_a_decider_descending_from_a_process_in_a_session_the_host_began_is_tied() -> None:
    """Its own session is another (``setsid``), its parent a process left in the
    host's session whose own parent is gone: tied, naming the session's leader."""
    apart = Decider((Process(40, 1), Process(30, 1)), session=40, sessions=frozenset({40, 20}))
    assert LED.tie(apart) == ("session", 20)
    assert agent_tie(apart, [LED]) == ("session", 20)


def test_a_decider_descending_from_a_session_the_agent_only_shares_is_not_tied() -> None:
    """A person's terminal emulator in a desktop's login session the agent is in too:
    what it starts, in a session of its own, decides."""
    terminal = Decider((Process(40, 1), Process(30, 1)), session=40, sessions=frozenset({40, 5}))
    assert LED.tie(terminal) is None
    assert agent_tie(terminal, [LED]) is None
    # The emulator itself, in that session, is beside the agent.
    assert LED.tie(Decider((Process(30, 1),), session=5, sessions=frozenset({5}))) == (
        "session",
        None,
    )


def test_the_refusal_says_the_decider_descends_from_the_agents_session() -> None:
    said = not_yours(LED, "session", 20)
    assert "descends from one in the session of the agent" in said
    assert "pid 20" in said


def test_a_session_the_agent_leads_is_its_own_and_its_lineage_sessions_are_read() -> None:
    with reading_stdin(sys.executable, new_session=True) as agent:
        kin = kin_of(agent.pid)
        assert agent.pid in kin.owned
        decider = decider_of(agent.pid)
        assert agent.pid in decider.sessions
        mine = session_of(os.getpid())
        assert not mine or mine in decider.sessions
        assert kin.tie(Decider((Process(1_000_001),), sessions=frozenset({agent.pid}))) == (
            "session",
            agent.pid,
        )


def test_an_agent_gone_keeps_its_own_session_while_a_process_runs_in_it() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE, start_new_session=True)  # fmt: skip
    departed = Departed()
    led = frozenset({child.pid})
    departed.left(AgentKin(agents=(Process(GONE),), sessions=led, owned=led))
    [kept] = departed.living()
    apart = Decider((Process(1_000_002), Process(1_000_001)), session=7, sessions=led | {7})
    assert kept.tie(apart) == ("session", child.pid)
    child.communicate(b"")
    assert departed.living() == []


AGENT = "import os, sys; print(os.getpid(), flush=True); sys.stdin.read()"


def test_a_session_the_agents_host_leads_is_its_own() -> None:
    """``setsid sh -c 'AGENT; true'``: the launcher began the session and is the host."""
    launcher = subprocess.Popen(
        ["setsid", "sh", "-c", f'{sys.executable} -c "{AGENT}"; true'],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert launcher.stdout is not None
    try:
        agent = int(launcher.stdout.readline())
        kin = kin_of(agent)
        assert launcher.pid in kin.owned
        assert agent not in kin.owned
        assert kin.hosts[0].pid == launcher.pid
    finally:
        launcher.communicate(b"")
