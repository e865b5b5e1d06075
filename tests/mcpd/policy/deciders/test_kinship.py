"""``Kinship``: one decider judged against many agents at once gives what judging it
against each agent in turn gives (``AgentKin.tie`` of the first agent kin to it),
with the agent it is kin to; a decider whose lineage was cut is kin to some agent
whenever there is one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mcpd.policy.deciders.kin import AgentKin, Decider, Process, Tie
from mcpd.policy.deciders.kinship import Found, Kinship

AGENT = AgentKin(agents=(Process(10, 1),), hosts=(Process(20, 1), Process(21, 1)))
OTHER = AgentKin(agents=(Process(30, 1),), hosts=(Process(20, 1),), sessions=frozenset({7}))
CROWD = AgentKin(crowd="too many agents gone", uid=1000, gone=True)


def one_by_one(decider: Decider, agents: list[AgentKin]) -> tuple[Tie, int | None] | None:
    """The rule ``Kinship`` keeps: each agent's own tie, the first agent kin first."""
    return next((t for a in agents if (t := a.tie(decider)) is not None), None)


def test_no_agents_make_no_kin_even_for_a_cut_lineage() -> None:
    kinship = Kinship([])
    assert kinship.empty
    assert kinship.tie(Decider((Process(10, 1),), cut=True)) is None


def test_a_decider_that_is_an_agents_process_is_tied_through_it() -> None:
    found = Kinship([OTHER, AGENT]).found(Decider((Process(50, 1), Process(10, 1))))
    assert found == Found("agent", 10, AGENT)


def test_the_first_agent_kin_wins_and_within_it_its_processes_before_its_hosts() -> None:
    # Kin to both through host 20: the first agent is the one named.
    decider = Decider((Process(50, 1), Process(20, 1)))
    assert Kinship([AGENT, OTHER]).found(decider) == Found("host", 20, AGENT)
    assert Kinship([OTHER, AGENT]).found(decider) == Found("host", 20, OTHER)
    # Through both the agent's process and its host: the process.
    both = Decider((Process(10, 1), Process(21, 1)))
    assert Kinship([AGENT]).tie(both) == ("agent", 10)


def test_a_reused_pid_is_no_tie() -> None:
    # The same pid, started at another time: another process.
    assert Kinship([AGENT]).tie(Decider((Process(10, 99),))) is None
    # A start time not read matches by pid alone.
    assert Kinship([AGENT]).tie(Decider((Process(10, None),))) == ("agent", 10)


def test_a_shared_session_ties_after_any_process_of_the_same_agent() -> None:
    assert Kinship([OTHER]).tie(Decider((Process(50, 1),), session=7)) == ("session", None)
    assert Kinship([OTHER]).tie(Decider((Process(30, 1),), session=7)) == ("agent", 30)
    # A session of no agent is no tie; session 0 (none) is never one.
    assert Kinship([OTHER]).tie(Decider((Process(50, 1),), session=8)) is None
    zero = AgentKin(agents=(Process(10, 1),), sessions=frozenset({0}))
    assert Kinship([zero]).tie(Decider((Process(50, 1),), session=0)) is None


def test_a_session_an_agent_leads_ties_what_descends_from_it_naming_the_leader() -> None:
    led = AgentKin(agents=(Process(10, 1),), sessions=frozenset({10, 3}), owned=frozenset({10}))
    below = Decider((Process(60, 1), Process(50, 1)), session=60, sessions=frozenset({60, 10}))
    assert Kinship([led]).tie(below) == ("session", 10)
    # A session the agent is in but does not lead ties only the processes in it.
    beside = Decider((Process(60, 1), Process(50, 1)), session=60, sessions=frozenset({60, 3}))
    assert Kinship([led]).tie(beside) is None


def test_a_session_two_agents_share_names_the_first() -> None:
    first = AgentKin(agents=(Process(10, 1),), sessions=frozenset({4}))
    second = AgentKin(agents=(Process(11, 1),), sessions=frozenset({4}))
    decider = Decider((Process(50, 1),), session=4)
    assert Kinship([first, second]).found(decider) == Found("session", None, first)
    assert Kinship([second, first]).found(decider) == Found("session", None, second)


def test_of_sessions_an_agent_leads_the_least_is_named() -> None:
    led = AgentKin(agents=(Process(10, 1),), sessions=frozenset({8, 9}), owned=frozenset({8, 9}))
    decider = Decider((Process(60, 1),), session=60, sessions=frozenset({60, 9, 8}))
    assert led.tie(decider) == ("session", 8)
    assert Kinship([led]).tie(decider) == ("session", 8)


def test_a_crowd_ties_every_decider_that_may_be_of_its_user() -> None:
    assert Kinship([CROWD]).found(Decider(uid=1000)) == Found("crowd", None, CROWD)
    assert Kinship([CROWD]).tie(Decider(uid=1001)) is None
    # sudo from the crowd's user's shell: among the lineage's users.
    assert Kinship([CROWD]).tie(Decider(uid=0, uids=frozenset({1000}))) == ("crowd", None)
    # An agent before the crowd in order is named first; after it, the crowd is.
    decider = Decider((Process(10, 1),), uid=1000)
    assert Kinship([AGENT, CROWD]).tie(decider) == ("agent", 10)
    assert Kinship([CROWD, AGENT]).tie(decider) == ("crowd", None)


def test_a_cut_lineage_tied_to_no_agent_is_kin_to_the_first_deeply() -> None:
    cut = Decider((Process(50, 1),), cut=True)
    assert Kinship([OTHER, AGENT]).found(cut) == Found("deep", None, OTHER)
    # Found kin outright, that tie is the one named.
    assert Kinship([OTHER, AGENT]).tie(Decider((Process(10, 1),), cut=True)) == ("agent", 10)


def test_agents_whose_process_is_unknown_are_passed_over() -> None:
    unknown = AgentKin(unknown="no such process", uid=1000)
    decider = Decider((Process(10, 1),), uid=1000)
    assert unknown.tie(decider) == ("unknown", None)
    assert Kinship([unknown]).tie(decider) is None
    assert Kinship([unknown, AGENT]).found(decider) == Found("agent", 10, AGENT)


# Agents as the daemon makes them: processes, hosts and sessions; or a crowd, which
# has none of those.
_pids = st.integers(2, 6)
_processes = st.lists(st.builds(Process, _pids, st.sampled_from([None, 1, 2])), max_size=3)
_sessions = st.frozensets(st.integers(0, 4), max_size=2)
_uids = st.sampled_from([None, 1000, 1001])
_known = st.builds(
    lambda agents, hosts, sessions, owned: AgentKin(
        agents=tuple(agents), hosts=tuple(hosts), sessions=sessions, owned=owned & sessions
    ),
    _processes,
    _processes,
    _sessions,
    _sessions,
)
_crowd = st.builds(lambda uid: AgentKin(crowd="full", uid=uid, gone=True), _uids)
_agents = st.lists(st.one_of(_known, _crowd), max_size=4)
_deciders = st.builds(
    lambda lineage, session, uid, uids, sessions, cut: Decider(
        tuple(lineage), session, uid, uids=uids, sessions=sessions, cut=cut
    ),
    _processes,
    st.sampled_from([None, 0, 1, 2]),
    _uids,
    st.frozensets(st.sampled_from([1000, 1001]), max_size=1),
    _sessions,
    st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(_agents, _deciders)
def test_judged_at_once_as_agent_by_agent(agents: list[AgentKin], decider: Decider) -> None:
    kinship = Kinship(agents)
    expected = one_by_one(decider, agents)
    if decider.cut:
        # Every agent may be among what was not read: kin whenever there is an agent.
        assert (kinship.tie(decider) is None) == (not agents)
        return
    assert kinship.tie(decider) == expected
    found = kinship.found(decider)
    if found is not None:
        first = next(a for a in agents if a.tie(decider) is not None)
        assert found.kin is first
