"""Starts from the threads that start sandboxed servers: what a confined start starts is
born in a Landlock domain of its own, out of reach of another start's abstract sockets
and signals, what either kind starts may not use the kernel's keyrings, the thread that
asked is as it was, and a thread that could not be set up starts nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from tests.support.system import keyrings
from transports.stdio.process import lifecycle
from transports.stdio.sandbox import keyring_filter, landlock
from transports.stdio.sandbox.confined import Confined, Keyless

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


Starts = Confined | Keyless


def output(argv: list[str], starts: Starts | None) -> str:
    """What ``argv`` printed, started from ``starts`` (or from the asking thread)."""

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, stdout=subprocess.PIPE)

    child = starts.run(start) if starts is not None else start()
    out, _ = child.communicate(timeout=30)
    return out.decode().strip()


def probe(name: str, starts: Starts | None) -> str:
    return output([sys.executable, "-I", "-S", "-c", PROBE, name], starts)


def test_a_child_started_from_the_thread_is_born_in_the_domain() -> None:
    if landlock.scoping() is not None:
        pytest.skip(f"no Landlock scoping here: {landlock.scoping()}")
    name = f"mcpd-confined-probe-{os.getpid()}"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind("\0" + name)
        listener.listen(8)
        assert probe(name, Confined()) == "in a domain"
        # The asking thread, and what it starts itself, are not.
        assert probe(name, None) == "outside"


def test_what_the_start_raises_is_raised_to_the_caller() -> None:
    def fails() -> None:
        raise FileNotFoundError(2, "No such file or directory", "/no/such/command")

    with pytest.raises(FileNotFoundError):
        Confined().run(fails)


def test_a_thread_that_cannot_enter_the_domain_starts_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused() -> None:
        raise landlock.Unavailable("Landlock is disabled at boot")

    monkeypatch.setattr(landlock, "restrict_self", refused)
    started: list[bool] = []

    def start() -> subprocess.Popen[bytes]:
        started.append(True)
        raise AssertionError("started outside its domain")

    with pytest.raises(OSError, match="cannot scope the sandbox with Landlock: Landlock is disab"):
        Confined().run(start)
    assert started == []
    # Said as it is where a server fails to start, not as a command it may not run.
    with pytest.raises(OSError) as caught:
        Confined().run(start)
    assert not isinstance(caught.value, PermissionError)
    failed = lifecycle._spawn_error("files", "/usr/bin/bwrap", None, caught.value)
    assert "cannot scope the sandbox with Landlock" in str(failed), failed


def keyrings_of(starts: Starts | None) -> str:
    return output([sys.executable, "-I", "-S", "-c", keyrings.PROBE], starts).split()[0]


@pytest.mark.parametrize("scoped", [False, True])
def test_what_either_thread_starts_may_not_use_the_kernels_keyrings(scoped: bool) -> None:
    if not keyrings.KNOWN:
        pytest.skip("the keyrings' system calls are not known on this machine")
    if scoped and landlock.scoping() is not None:
        pytest.skip(f"no Landlock scoping here: {landlock.scoping()}")
    assert keyrings_of(Confined() if scoped else Keyless()) == "refused"
    # The asking thread, and what it starts itself, may.
    assert keyrings_of(None) == "allowed"


def test_the_thread_under_the_filter_alone_is_not_in_the_domain() -> None:
    if landlock.scoping() is not None:
        pytest.skip(f"no Landlock scoping here: {landlock.scoping()}")
    name = f"mcpd-keyless-probe-{os.getpid()}"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind("\0" + name)
        listener.listen(8)
        assert probe(name, Keyless()) == "outside"


def test_a_thread_that_cannot_refuse_the_keyrings_starts_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused() -> None:
        raise OSError(1, "prctl(PR_SET_SECCOMP): Operation not permitted")

    monkeypatch.setattr(keyring_filter, "enter", refused)
    started: list[bool] = []

    def start() -> subprocess.Popen[bytes]:
        started.append(True)
        raise AssertionError("started without the filter")

    for scoped in (False, True):
        if scoped and landlock.scoping() is not None:
            continue
        with pytest.raises(OSError) as caught:
            (Confined() if scoped else Keyless()).run(start)
        assert str(caught.value) == (
            "cannot refuse the kernel's keyrings to the sandbox: "
            "prctl(PR_SET_SECCOMP): Operation not permitted"
        )
    assert started == []


# Listens on an abstract name, greets whoever connects, and signals the process it is
# given (0: none) once it has a connection; says what it met.
NEIGHBOUR = """
import os, signal, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind("\\0" + sys.argv[1])
s.listen(8)
print("listening", flush=True)
target = int(sys.stdin.readline())
if target:
    try:
        os.kill(target, signal.SIGTERM)
    except PermissionError:
        print("signal refused", flush=True)
    else:
        print("signalled", flush=True)
"""


def test_each_confined_start_is_a_domain_of_its_own() -> None:
    if landlock.scoping() is not None:
        pytest.skip(f"no Landlock scoping here: {landlock.scoping()}")
    starts = Confined()
    names = [f"mcpd-confined-{n}-{os.getpid()}" for n in range(2)]

    def start(name: str) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-I", "-S", "-c", NEIGHBOUR, name]
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    first, second = (starts.run(lambda name=name: start(name)) for name in names)
    try:
        for child in (first, second):
            assert child.stdout is not None
            assert child.stdout.readline() == b"listening\n"
        # Neither reaches the other's abstract socket, nor signals it.
        assert probe(names[0], starts) == "in a domain"
        out, _ = second.communicate(f"{first.pid}\n".encode(), timeout=30)
        assert out == b"signal refused\n"
        assert first.poll() is None
    finally:
        for child in (first, second):
            if child.poll() is None:
                child.kill()
            child.communicate(timeout=30)
