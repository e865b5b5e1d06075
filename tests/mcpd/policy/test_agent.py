"""Who an agent is: the key rate limits and approvals tell agents apart by, how people
are shown it, and what /proc says of a process whose program chose a name to confuse
the reading (parentheses, spaces, control characters, a great length, a deleted file).
Sessions are made here (``start_new_session``): the tests' own may read as 0."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mcpd.policy.agent import (
    AgentInfo,
    Decider,
    decider_of,
    exe_of,
    parent_of,
    session_of,
    user_name,
)

GONE = 2**22 + 12345  # above any pid the kernel hands out


@contextmanager
def running(program: Path | str, new_session: bool = False) -> Iterator[subprocess.Popen[bytes]]:
    """``program`` (a copy of cat) running until the block ends."""
    child = subprocess.Popen(
        [str(program)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=new_session,
    )
    try:
        yield child
    finally:
        child.communicate(b"")


def cat_named(tmp_path: Path, name: str) -> Path:
    program = tmp_path / name
    shutil.copy(shutil.which("cat") or "/bin/cat", program)
    return program


# -- the key and the label --


def test_an_agent_is_told_apart_by_its_process_else_its_user_else_the_endpoint() -> None:
    assert AgentInfo(pid=7, connection="c1").key == AgentInfo(pid=7, connection="c2").key
    assert AgentInfo(pid=7).key != AgentInfo(pid=8).key
    # A process whose pid the kernel does not give (another PID namespace): its user.
    assert AgentInfo(uid=1000, connection="c1").key == AgentInfo(uid=1000, connection="c2").key
    assert AgentInfo(uid=1000).key != AgentInfo(uid=1001).key
    # Over TCP mcpd sees neither; a new connection is no new agent.
    assert AgentInfo(connection="c1").key == AgentInfo(connection="c2").key
    # No user can pass for a process.
    assert AgentInfo(uid=7).key != AgentInfo(pid=7).key
    assert AgentInfo(pid=0).key == "pid:0"


def test_the_label_names_the_process_its_user_and_its_profile() -> None:
    label = AgentInfo(uid=0, pid=4242, exe="claude", profile="ci", connection="c1").label()
    assert label == "pid 4242 (claude), uid 0 (root), profile ci"
    assert AgentInfo(pid=4242).label() == "pid 4242, profile default"
    assert AgentInfo(connection="http-7").label() == "connection http-7, profile default"
    assert AgentInfo().label() == "connection ?, profile default"


def test_a_uid_with_no_user_is_labelled_so() -> None:
    assert user_name(2**31 - 7) == "no user name"
    assert AgentInfo(uid=2**31 - 7).label() == f"uid {2**31 - 7} (no user name), profile default"


# -- what /proc says --


def test_a_program_named_with_parentheses_and_spaces_does_not_shift_its_stat_fields(
    tmp_path: Path,
) -> None:
    # /proc/PID/stat puts the name in parentheses; a name that closes them early and
    # adds numbers must not pass for the process's parent or session.
    program = cat_named(tmp_path, "x) R 1 1 1 (y")
    with running(program, new_session=True) as child:
        assert parent_of(child.pid) == os.getpid()
        assert session_of(child.pid) == child.pid
        assert decider_of(child.pid).lineage[:2] == (child.pid, os.getpid())


def test_a_long_program_name_is_cut_and_a_deleted_one_is_still_named(tmp_path: Path) -> None:
    long = cat_named(tmp_path, "a" * 200)
    with running(long) as child:
        assert exe_of(child.pid) == "a" * 64
    doomed = cat_named(tmp_path, "doomed-agent")
    with running(doomed) as child:
        doomed.unlink()
        assert exe_of(child.pid) == "doomed-agent"


def test_a_process_that_is_gone_says_nothing() -> None:
    assert exe_of(GONE) is None
    assert parent_of(GONE) is None
    assert session_of(GONE) is None
    assert decider_of(GONE) == Decider((GONE,), None)


def test_the_lineage_climbs_to_init_and_stops_at_its_limit() -> None:
    lineage = decider_of(os.getpid()).lineage
    assert lineage[0] == os.getpid() and lineage[1] == os.getppid()
    assert 1 not in lineage and 0 not in lineage
    assert decider_of(os.getpid(), limit=1).lineage == (os.getpid(),)


# -- who may decide --


def test_the_agent_and_what_it_started_may_not_decide_its_call() -> None:
    decider = Decider((300, 200, 100), session=None)
    assert decider.excluded(300) is not None  # the agent itself
    assert decider.excluded(100) is not None  # the agent started the decider
    assert "cannot decide it" in (decider.excluded(200) or "")
    assert decider.excluded(400) is None


def test_a_decider_in_the_agents_session_is_refused_one_apart_is_not() -> None:
    with running(sys.executable, new_session=True) as agent:
        same = Decider((1_000_001,), session=agent.pid)
        reason = same.excluded(agent.pid)
        assert reason is not None and "same session" in reason
        apart = Decider((1_000_001,), session=agent.pid + 1)
        assert apart.excluded(agent.pid) is None


@pytest.mark.parametrize("session", [0, None])
def test_an_unknown_session_matches_no_agent(session: int | None) -> None:
    # 0 (begun outside the PID namespace) or unread: it says nothing of who is beside whom,
    # not even about an agent whose session reads the same.
    with running(sys.executable) as agent:
        agent_session = session_of(agent.pid)
        assert Decider((1_000_001,), session=session).excluded(agent.pid) is None
        assert Decider((1_000_001,), session=agent_session).excluded(GONE) is None
