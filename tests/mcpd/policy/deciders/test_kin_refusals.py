"""Why a decider kin to an agent may not decide its call, in words for a person: each
tie says what was found (and through which process or session) and where to decide
instead."""

from __future__ import annotations

import pytest

from mcpd.policy.deciders.kin import HOSTS, LINEAGE, AgentKin, Decider, Process, Tie
from mcpd.policy.deciders.kin_refusals import crowded, not_yours, too_deep

AGENT = AgentKin(uid=1000)


@pytest.mark.parametrize(
    ("tie", "says", "instead"),
    [
        ("agent", "the agent that made this call (pid 42)", "one the agent did not start"),
        (
            "host",
            "the host that started the agent that made this call (pid 42;",
            "one the host did not start",
        ),
        (
            "unread",
            "that started the agent that made this call (pid 42)",
            "start the agent through fewer launchers",
        ),
        ("session", "the session pid 42 began", "one no agent started"),
    ],
)
def test_a_tie_through_a_process_names_it_and_where_to_decide(
    tie: Tie, says: str, instead: str
) -> None:
    text = not_yours(AGENT, tie, 42)
    assert says in text
    assert text.endswith(instead)


def test_a_session_shared_without_a_leader_named_sends_to_another_terminal() -> None:
    text = not_yours(AGENT, "session", None)
    assert text.startswith("a process in the same session as the agent")
    assert text.endswith("decide it from another terminal")
    assert "pid" not in text


def test_unread_names_the_agents_user_and_how_far_mcpd_reads() -> None:
    text = not_yours(AgentKin(uid=1234), "unread", 5)
    assert f"it reads {HOSTS} processes above it" in text
    assert "a process of uid 1234" in text


def test_a_lineage_too_deep_says_how_deep_mcpd_reads() -> None:
    assert f"({LINEAGE})" in too_deep()
    assert not_yours(AGENT, "deep", None) == (
        f"{too_deep()}; decide it from a terminal of your own, one no agent started"
    )


def test_a_crowd_gives_its_own_reason_first() -> None:
    kin = AgentKin(crowd="mcpd keeps 64 agents gone at most", uid=1000)
    assert not_yours(kin, "crowd", None) == crowded(kin)
    assert crowded(kin).startswith("mcpd keeps 64 agents gone at most; until then, ")


def test_an_agent_not_found_says_why_and_sends_to_the_status_page() -> None:
    anyone = AgentKin(unknown="its socket peer left")
    text = not_yours(anyone, "unknown", None)
    assert "(its socket peer left)" in text
    assert text.endswith("decide it on the status page (`mcpd dashboard`)")
    of_user = AgentKin(unknown="its socket peer left", uid=1000)
    text = not_yours(of_user, "unknown", None)
    assert "a process of uid 1000 here" in text
    assert "or as another user who may decide (root, or mcpd's own user)" in text


def test_an_unread_agent_whose_own_process_is_gone_names_no_pid() -> None:
    """A departed agent's process ended while what started it lives on, read only in
    part: the tie names no process, and the words name none either."""
    gone = AgentKin(hosts=(Process(20, 1),), uid=1000, unread=True, gone=True)
    tie = gone.tie(Decider(uid=1000))
    assert tie == ("unread", None)
    text = not_yours(gone, *tie)
    assert "pid" not in text
    assert text.startswith(
        "mcpd could not read all that started the agent that made this call: it reads "
        f"{HOSTS} processes above it"
    )
