"""Who an agent connection is for the policy and the audit log: the kernel's word on
its process, the program it runs (read once), and an id of its own."""

from __future__ import annotations

import os
import sys

import pytest

from mcpd.agents import identity
from mcpd.agents.identity import Identity, new_connection_id
from mcpd.agents.peers import Peer


def me() -> Peer:
    return Peer(pid=os.getpid(), uid=os.getuid(), gid=os.getgid())


def test_a_connection_is_its_process_and_program() -> None:
    info = Identity(me()).info("default", modern=False)
    assert (info.uid, info.pid, info.profile, info.era) == (
        os.getuid(),
        os.getpid(),
        "default",
        "legacy",
    )
    assert info.exe == os.path.basename(os.path.realpath(sys.executable))


def test_a_caller_nothing_is_known_of_has_no_uid_pid_or_program() -> None:
    info = Identity(None).info("default", modern=True)
    assert (info.uid, info.pid, info.exe, info.era) == (None, None, None, "modern")


@pytest.mark.parametrize("pid", [0, -1])
def test_a_process_of_another_pid_namespace_is_not_looked_up(
    pid: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def looked_up(pid: int) -> str:
        raise AssertionError(f"/proc/{pid} read")

    monkeypatch.setattr(identity, "exe_of", looked_up)
    info = Identity(Peer(pid=pid, uid=1000, gid=1000, unverified=True)).info("p", True)
    assert (info.uid, info.pid, info.exe) == (1000, None, None)


def test_the_program_is_read_once_and_the_profile_and_era_follow_each_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[int] = []

    def exe_of(pid: int) -> str:
        reads.append(pid)
        return "agent"

    monkeypatch.setattr(identity, "exe_of", exe_of)
    who = Identity(Peer(pid=4242, uid=1, gid=1))
    first = who.info("default", modern=False)
    assert who.info("default", modern=False) is first
    other = who.info("work", modern=True)
    assert (other.profile, other.era, other.exe, other.connection) == (
        "work",
        "modern",
        "agent",
        first.connection,
    )
    assert reads == [4242]


def test_after_a_profile_switch_calls_of_either_era_are_in_the_new_profile() -> None:
    who = Identity(None)
    assert who.info("default", modern=False).profile == "default"
    assert who.info("default", modern=True).profile == "default"
    assert who.info("work", modern=True).profile == "work"
    legacy = who.info("work", modern=False)
    assert (legacy.profile, legacy.era) == ("work", "legacy")
    modern = who.info("work", modern=True)
    assert (modern.profile, modern.era) == ("work", "modern")


def test_each_connection_has_an_id_of_its_own() -> None:
    ids = {Identity(None).connection for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 8 and int(i, 16) >= 0 for i in ids)
    assert len(new_connection_id()) == 8
