"""What only a person may do on the socket, refused to an agent's side
(``refuse_an_agents_side``): who is refused, through which tie, and the words that
say so and where to run it instead; whoever is kin to no agent is let through."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcpd.agents.own_methods.persons_only import refuse_an_agents_side
from mcpd.policy.deciders.kin import AgentKin, Decider, Process, kin_of
from mcpd.policy.deciders.kin_refusals import too_deep
from protocol.jsonrpc import messages as rpc

WHAT = "mcpd approve"
BECAUSE = "what a server's definitions say is for a person to approve"
AGENT = AgentKin(
    agents=(Process(10, 1),),
    hosts=(Process(20, 1),),
    sessions=frozenset({5, 20}),
    owned=frozenset({20}),
)
TAIL = (
    f", and {BECAUSE}; it must come from a terminal that never ran an agent of mcpd's: "
    "open a new terminal window (not one started from this shell) or log in anew (ssh, a "
    "console), and run it there"
)


def refusal(decider: Decider, *agents: AgentKin) -> str:
    with pytest.raises(rpc.RPCError) as info:
        refuse_an_agents_side(decider, agents, WHAT, BECAUSE)
    assert info.value.code == -32000
    return info.value.message


def test_a_person_kin_to_no_agent_is_let_through() -> None:
    refuse_an_agents_side(Decider((Process(99, 1),), session=99), [AGENT], WHAT, BECAUSE)
    refuse_an_agents_side(Decider((Process(10, 1),)), [], WHAT, BECAUSE)


def test_an_agent_or_what_it_started_is_refused_naming_its_pid() -> None:
    assert refusal(Decider((Process(50, 1), Process(10, 1))), AGENT) == (
        f"{WHAT} is refused: this process is an agent connected to mcpd (pid 10), or was "
        f"started by one{TAIL}"
    )


def test_what_a_host_started_is_refused_naming_the_host() -> None:
    message = refusal(Decider((Process(50, 1), Process(20, 1))), AGENT)
    # Named too where a process 20 runs here (its name is read as the refusal is made).
    assert message.startswith(f"{WHAT} is refused: this process descends from pid 20")
    assert message.endswith(f", which ran an agent connected to mcpd (pid 10){TAIL}")


def test_a_shell_that_ran_mcpd_call_is_named_with_the_call() -> None:
    """The shell the person typed ``mcpd call`` in is what started that agent: the
    refusal names the shell by its program and the agent as the command it was."""
    shell = os.getpid()  # a process that runs, whose name /proc gives
    call = AgentKin(
        agents=(Process(10, 1),), hosts=(Process(shell),), program="python3", command="mcpd call"
    )
    message = refusal(Decider((Process(50, 1), Process(shell))), call)
    name = Path(os.readlink(f"/proc/{shell}/exe")).name
    assert message.startswith(
        f"{WHAT} is refused: this process descends from pid {shell} ({name}), which ran "
        "an agent connected to mcpd (pid 10, python3 when it connected, whose command line "
        "read `mcpd call`: "
        "each `mcpd call`, `mcpd read` and `mcpd prompt` is an agent of mcpd's)"
    )
    assert message.endswith(TAIL)


def test_a_listing_for_a_program_is_named_with_its_flag_and_why_it_counts() -> None:
    """``mcpd tools`` for a person is no agent: the refusal names the flag that made
    this listing one, and says that is why."""
    shell = os.getpid()
    listing = AgentKin(
        agents=(Process(10, 1),),
        hosts=(Process(shell),),
        program="python3",
        command="mcpd tools --json",
    )
    message = refusal(Decider((Process(50, 1), Process(shell))), listing)
    assert "whose command line read `mcpd tools --json`: a listing for a program " in message
    assert "(`--json`, `--format`) is an agent of mcpd's, as each `mcpd call`" in message


def test_an_agent_that_still_runs_is_named_by_what_it_runs_now_to_its_own_user() -> None:
    """Named by the program the kernel says it runs as the refusal is made, and by the
    one it ran when it connected where it exec'd another since; to another user, only
    by the one it ran when it connected."""
    me = kin_of(os.getpid()).agents[0]
    name = Path(os.readlink(f"/proc/{me.pid}/exe")).name
    for seen, shown in ((name, name), ("sh", f"now {name}, sh when it connected")):
        agent = AgentKin(agents=(me,), program=seen)
        mine = Decider((Process(50, 1), me), uid=os.getuid())
        assert f"mcpd (pid {me.pid}, {shown}), or was" in refusal(mine, agent)
        theirs = Decider((Process(50, 1), me), uid=os.getuid() + 1)
        assert f"mcpd (pid {me.pid}, {seen} when it connected), or" in refusal(theirs, agent)


def test_an_agent_gone_whose_processes_live_on_is_said_to_have_connected() -> None:
    gone = AgentKin(agents=(Process(10, 1),), gone=True)
    assert "is an agent that had connected to mcpd (pid 10)" in refusal(
        Decider((Process(10, 1),)), gone
    )


def test_a_session_tie_says_whether_it_is_shared_or_descended_from() -> None:
    beside = refusal(Decider((Process(60, 1),), session=5), AGENT)
    assert "this process is in the session of an agent connected to mcpd (pid 10;" in beside
    below = refusal(Decider((Process(60, 1),), session=60, sessions=frozenset({60, 20})), AGENT)
    assert (
        "this process descends from a process in the session of an agent connected to mcpd "
        "(pid 10; the session pid 20 began" in below
    )


def test_a_crowd_says_its_own_reason() -> None:
    crowd = AgentKin(crowd="mcpd keeps 64 agents gone at most", uid=1000, gone=True)
    assert refusal(Decider(uid=1000), crowd) == (
        f"{WHAT} is refused: mcpd keeps 64 agents gone at most; until then, run it from a "
        "terminal no agent started, or as another user who may"
    )


def test_a_lineage_too_deep_to_read_is_refused_saying_so() -> None:
    assert refusal(Decider((Process(99, 1),), cut=True), AGENT) == (
        f"{WHAT} is refused: {too_deep()}, and {BECAUSE}; run it from a terminal of your "
        "own, one no agent started"
    )


def test_an_agent_whose_process_is_unknown_is_passed_over() -> None:
    unknown = AgentKin(unknown="its peer left", uid=1000)
    refuse_an_agents_side(Decider((Process(10, 1),), uid=1000), [unknown], WHAT, BECAUSE)
