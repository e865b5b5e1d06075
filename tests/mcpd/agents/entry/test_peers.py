"""Who is on the other end of a socket, from the kernel and /proc alone, and whether they
may use it: the owner and root always, ``allow_uids`` and the members of
``allow_groups``, never a server's own process taken for the owner; a process is tied
to its server by its ancestry or the mark its environment carries."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from mcpd.agents.entry.peers import (
    Peer,
    PeerWatch,
    is_allowed,
    is_owner,
    is_stopped,
    peer_of,
    resolve_groups,
    server_of,
    untrusted_daemon,
)

ME = os.getuid()
STRANGER = 54_321  # a uid that is neither this user nor root


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        yield a, b


def test_the_kernel_says_who_is_connected(pair: tuple[socket.socket, socket.socket]) -> None:
    peer = peer_of(pair[0])
    assert peer is not None
    assert (peer.pid, peer.uid, peer.gid) == (os.getpid(), ME, os.getgid())
    assert peer.groups is None or os.getgid() in peer.groups or peer.groups >= set(os.getgroups())


def test_a_daemon_of_this_user_is_trusted(pair: tuple[socket.socket, socket.socket]) -> None:
    assert untrusted_daemon(pair[0], "/run/mcpd.sock") is None


# -- who may use the socket --


def stranger(gid: int = STRANGER, groups: frozenset[int] | None = frozenset()) -> Peer:
    return Peer(pid=os.getpid(), uid=STRANGER, gid=gid, groups=groups)


def test_the_owner_and_root_may_always_connect() -> None:
    for uid in (ME, 0):
        assert is_allowed(Peer(1, uid, uid, frozenset()), [], set())


def test_another_user_needs_to_be_allowed() -> None:
    assert not is_allowed(stranger(), [], set())
    assert not is_allowed(stranger(), [STRANGER + 1], {STRANGER + 1})
    assert is_allowed(stranger(), [STRANGER], set())


def test_a_member_of_an_allowed_group_may_connect() -> None:
    assert is_allowed(stranger(gid=4242), [], {4242})
    assert is_allowed(stranger(groups=frozenset({7, 4242})), [], {4242})
    assert not is_allowed(stranger(groups=frozenset({7})), [], {4242})


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a child other groups takes root")
def test_groups_the_kernel_did_not_give_are_read_from_proc() -> None:
    code = "import sys; print('ready', flush=True); sys.stdin.read()"
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        extra_groups=[4242],
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"
        peer = Peer(pid=child.pid, uid=STRANGER, gid=STRANGER, groups=None)
        assert is_allowed(peer, [], {4242})
        assert not is_allowed(peer, [], {4243})
    finally:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.close()
        child.wait(timeout=30)
        child.stdout.close()
    # Gone, it has no groups left to read.
    assert not is_allowed(Peer(pid=child.pid, uid=STRANGER, gid=STRANGER), [], {4242})


def test_only_the_daemons_user_and_root_are_its_owner() -> None:
    assert is_owner(None)  # in process: the daemon itself
    assert is_owner(Peer(1, ME, ME))
    assert is_owner(Peer(1, 0, 0))
    assert not is_owner(Peer(1, STRANGER, STRANGER))


def test_a_servers_process_is_never_the_owner_whatever_its_uid() -> None:
    assert not is_owner(Peer(1, ME, ME, server="notes"))
    assert not is_owner(Peer(1, 0, 0, unverified=True))


# -- allow_groups --


def test_groups_are_resolved_by_number_or_by_name() -> None:
    import grp

    root_gid = grp.getgrnam("root").gr_gid
    assert resolve_groups(["4242", "root"]) == {4242, root_gid}


def test_a_group_that_does_not_exist_is_left_out() -> None:
    assert resolve_groups(["no-such-group-here"]) == set()


def test_a_group_of_digits_other_than_ascii_is_a_name_not_a_number() -> None:
    # "²" passes str.isdigit() but not int(); "٣" would be read as group 3.
    assert resolve_groups(["\u00b2", "\u0663"]) == set()


# -- which server a process belongs to --


def test_a_process_belongs_to_the_server_it_descends_from() -> None:
    me, parent = os.getpid(), os.getppid()
    assert server_of(me, {me: "self"}, {}, "MCPD_TEST_MARK") == "self"
    assert server_of(me, {parent: "above"}, {}, "MCPD_TEST_MARK") == "above"
    assert server_of(me, {}, {}, "MCPD_TEST_MARK") is None


def test_a_process_that_left_its_servers_tree_is_known_by_its_mark() -> None:
    env = {**os.environ, "MCPD_TEST_MARK": "start-token-1"}
    code = "import sys; print('ready', flush=True); sys.stdin.read()"
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"  # its environment is its own now
        marks = {"start-token-1": "notes"}
        assert server_of(child.pid, {}, marks, "MCPD_TEST_MARK") == "notes"
        assert server_of(child.pid, {}, {"other": "x"}, "MCPD_TEST_MARK") is None
        assert server_of(child.pid, {}, marks, "MCPD_OTHER_MARK") is None
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
        assert child.stdout is not None
        child.stdout.close()


def test_pid_one_and_below_are_nobodys() -> None:
    assert server_of(1, {1: "init"}, {}, "MCPD_TEST_MARK") is None
    assert server_of(0, {0: "x"}, {}, "MCPD_TEST_MARK") is None


# -- whether the process that connected is still there --


def test_a_connected_process_that_is_there_is_there(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    watch = PeerWatch(pair[0], os.getpid())  # type: ignore[arg-type]
    try:
        assert watch.still_there()
    finally:
        watch.close()


def test_a_process_that_connected_and_exited_is_gone(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "s.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(1)
        code = (
            "import socket, sys; s = socket.socket(socket.AF_UNIX); "
            f"s.connect({path!r}); sys.exit(0)"
        )
        child = subprocess.Popen([sys.executable, "-c", code])
        conn, _ = listener.accept()
        with conn:
            child.wait(timeout=30)
            watch = PeerWatch(conn, child.pid)  # type: ignore[arg-type]
            try:
                assert not watch.still_there()
            finally:
                watch.close()


def test_a_stopped_process_is_told_from_a_running_one() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not is_stopped(child.pid)
        child.send_signal(signal.SIGSTOP)
        # The kernel stops it a moment after the signal: wait for the state it reports.
        os.waitid(os.P_PID, child.pid, os.WSTOPPED | os.WNOWAIT)
        assert is_stopped(child.pid)
        child.send_signal(signal.SIGCONT)
        os.waitid(os.P_PID, child.pid, os.WCONTINUED | os.WNOWAIT)
        assert not is_stopped(child.pid)
    finally:
        child.kill()
        child.wait()
    assert not is_stopped(child.pid)  # gone: nothing to let go on
