"""Where a look at processes stops: a decider whose ancestors are read to the limit,
an agent whose hosts are, and the processes that adopt orphans and start a person's
programs too (init, the user's service manager), which are never an agent's host.
Real processes, in sessions of their own (``start_new_session``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import msgspec
import pytest

from mcpd.policy.deciders import kin
from mcpd.policy.deciders.kin import AgentKin, Decider, Process, decider_of, kin_of
from mcpd.policy.deciders.kin_refusals import not_yours
from mcpd.policy.deciders.kinship import Kinship
from tests.support.clients.self_approval import nested
from tests.support.parts.kinship import agent_tie

GONE = 2**22 + 12345  # above any pid the kernel hands out
WAITS = "import os, sys; print(os.getpid(), flush=True); sys.stdin.read()"


@contextmanager
def below(depth: int, new_session: bool = True) -> Iterator[int]:
    """The pid of a process below ``depth`` shells (in a session of its own), until the
    block ends."""
    child = subprocess.Popen(
        nested(depth, [sys.executable, "-c", WAITS]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=new_session,
    )
    assert child.stdout is not None and child.stdin is not None
    try:
        yield int(child.stdout.readline())
    finally:
        child.stdin.close()
        child.wait()


def test_a_decider_whose_ancestors_are_read_to_the_limit_is_tied_to_every_agent() -> None:
    agent = AgentKin(agents=(Process(GONE),))
    with below(3) as pid:
        whole = decider_of(pid)
        cut = decider_of(pid, limit=3)
    assert not whole.cut and agent.tie(whole) is None
    assert cut.cut and len(cut.lineage) == 3
    assert agent.tie(cut) == ("deep", None)
    assert agent_tie(cut, [agent]) == ("deep", None)
    assert agent_tie(cut, []) is None  # no agent it could descend from
    assert "descends from more processes than mcpd reads" in not_yours(agent, "deep", None)


def test_a_decider_read_to_the_limit_is_tied_on_the_page_too() -> None:
    agent = AgentKin(unknown="not found", uid=1000)
    cut = Decider((Process(GONE),), uid=1000, page=True, cut=True)
    assert agent.tie(cut) == ("deep", None)


def test_an_agent_whose_hosts_are_read_to_the_limit_is_decided_by_none_of_its_user() -> None:
    """A host starts a client apart, below more launchers than are read: none of the
    client's user (nor any decider that descends from a process of that user, as
    ``sudo`` from their shell does) may decide its calls; another user may."""
    with below(5) as pid:
        whole = kin_of(pid)
        cut = msgspec.structs.replace(kin_of(pid, limit=3), uid=1000)
    assert not whole.unread and cut.unread and len(cut.hosts) == 3
    mine = Decider((Process(GONE),), uid=1000, uids=frozenset({1000}))
    sudo = Decider((Process(GONE),), uid=0, uids=frozenset({0, 1000}))
    root = Decider((Process(GONE),), uid=0, uids=frozenset({0}))
    assert cut.tie(mine) == ("unread", pid)
    assert cut.tie(sudo) == ("unread", pid)
    assert cut.tie(msgspec.structs.replace(mine, page=True)) == ("unread", pid)
    assert cut.tie(root) is None
    said = not_yours(cut, "unread", pid)
    assert f"pid {pid}" in said and "uid 1000" in said and "another user" in said


def test_a_process_running_what_init_runs_is_never_a_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An agent orphaned onto the user's service manager (``systemd --user`` runs the
    program pid 1 runs): that manager starts a person's terminals too, and is not the
    agent's host. Here the test's own Python stands in for it."""
    with below(0, new_session=True) as pid:
        assert [p.pid for p in kin_of(pid).hosts] == [os.getpid()]
        monkeypatch.setattr(kin, "init_program", lambda: os.readlink("/proc/self/exe"))
        found = kin_of(pid)
    assert found.hosts == () and not found.unread
    assert os.getsid(0) not in found.sessions
    person = Decider((Process(os.getpid()),), session=os.getsid(0))
    assert found.tie(person) is None


def test_a_tie_to_a_gone_agent_says_it_is_gone() -> None:
    gone = AgentKin(agents=(Process(GONE),), gone=True)
    found = Kinship([gone]).found(Decider((Process(GONE),)))
    assert found is not None and found.kin.gone and found.tie == "agent"
