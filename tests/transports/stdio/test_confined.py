"""Starts from the threads that start sandboxed servers: what the one in a Landlock
domain starts is born in the domain, what either starts may not use the kernel's
keyrings, the thread that asked is as it was, and a thread that could not be set up
starts nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from tests.support import keyrings
from transports.stdio import keyring_filter, landlock, process
from transports.stdio.confined import ThreadStarts

# Whether a process is in a domain scoped to abstract sockets: its connect to one the
# test bound (outside any domain) is refused; outside, it gets through.
PROBE = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\\0" + sys.argv[1])
except PermissionError:
    print("in a domain")
else:
    print("outside")
"""


def probe(name: str, starts: ThreadStarts | None) -> str:
    def start() -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-I", "-S", "-c", PROBE, name]
        return subprocess.run(argv, capture_output=True, text=True, timeout=30)

    done = starts.run(start) if starts is not None else start()
    return done.stdout.strip()


def test_a_child_started_from_the_thread_is_born_in_the_domain() -> None:
    if landlock.scoping() is not None:
        pytest.skip(f"no Landlock scoping here: {landlock.scoping()}")
    name = f"mcpd-confined-probe-{os.getpid()}"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind("\0" + name)
        listener.listen(8)
        starts = ThreadStarts(scoped=True)
        assert probe(name, starts) == "in a domain"
        # The asking thread, and what it starts itself, are not.
        assert probe(name, None) == "outside"


def test_what_the_start_raises_is_raised_to_the_caller() -> None:
    def fails() -> None:
        raise FileNotFoundError(2, "No such file or directory", "/no/such/command")

    with pytest.raises(FileNotFoundError):
        ThreadStarts(scoped=True).run(fails)


def test_a_thread_that_cannot_enter_the_domain_starts_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused() -> None:
        raise landlock.Unavailable("Landlock is disabled at boot")

    monkeypatch.setattr(landlock, "enter", refused)
    started: list[bool] = []
    with pytest.raises(OSError, match="cannot scope the sandbox with Landlock: Landlock is disab"):
        ThreadStarts(scoped=True).run(lambda: started.append(True))
    assert started == []
    # Said as it is where a server fails to start, not as a command it may not run.
    with pytest.raises(OSError) as caught:
        ThreadStarts(scoped=True).run(lambda: started.append(True))
    assert not isinstance(caught.value, PermissionError)
    failed = process._spawn_error("files", "/usr/bin/bwrap", None, caught.value)
    assert "cannot scope the sandbox with Landlock" in str(failed), failed


def keyrings_of(starts: ThreadStarts | None) -> str:
    def start() -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-I", "-S", "-c", keyrings.PROBE]
        return subprocess.run(argv, capture_output=True, text=True, timeout=30)

    done = starts.run(start) if starts is not None else start()
    return done.stdout.strip().split()[0]


@pytest.mark.parametrize("scoped", [False, True])
def test_what_either_thread_starts_may_not_use_the_kernels_keyrings(scoped: bool) -> None:
    if not keyrings.KNOWN:
        pytest.skip("the keyrings' system calls are not known on this machine")
    if scoped and landlock.scoping() is not None:
        pytest.skip(f"no Landlock scoping here: {landlock.scoping()}")
    assert keyrings_of(ThreadStarts(scoped=scoped)) == "refused"
    # The asking thread, and what it starts itself, may.
    assert keyrings_of(None) == "allowed"


def test_the_thread_under_the_filter_alone_is_not_in_the_domain() -> None:
    if landlock.scoping() is not None:
        pytest.skip(f"no Landlock scoping here: {landlock.scoping()}")
    name = f"mcpd-keyless-probe-{os.getpid()}"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind("\0" + name)
        listener.listen(8)
        assert probe(name, ThreadStarts(scoped=False)) == "outside"


def test_a_thread_that_cannot_refuse_the_keyrings_starts_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused() -> None:
        raise OSError(1, "prctl(PR_SET_SECCOMP): Operation not permitted")

    monkeypatch.setattr(keyring_filter, "enter", refused)
    started: list[bool] = []
    for scoped in (False, True):
        if scoped and landlock.scoping() is not None:
            continue
        with pytest.raises(OSError) as caught:
            ThreadStarts(scoped=scoped).run(lambda: started.append(True))
        assert str(caught.value) == (
            "cannot refuse the kernel's keyrings to the sandbox: "
            "prctl(PR_SET_SECCOMP): Operation not permitted"
        )
    assert started == []
