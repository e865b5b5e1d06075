"""Starts from the thread in a Landlock domain: what it starts is born in the domain,
the thread that asked is not in it, and a thread that could not enter it starts
nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from transports.stdio import landlock, process
from transports.stdio.confined import ConfinedStarts

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


def probe(name: str, starts: ConfinedStarts | None) -> str:
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
        starts = ConfinedStarts()
        assert probe(name, starts) == "in a domain"
        # The asking thread, and what it starts itself, are not.
        assert probe(name, None) == "outside"


def test_what_the_start_raises_is_raised_to_the_caller() -> None:
    def fails() -> None:
        raise FileNotFoundError(2, "No such file or directory", "/no/such/command")

    with pytest.raises(FileNotFoundError):
        ConfinedStarts().run(fails)


def test_a_thread_that_cannot_enter_the_domain_starts_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused() -> None:
        raise landlock.Unavailable("Landlock is disabled at boot")

    monkeypatch.setattr(landlock, "enter", refused)
    started: list[bool] = []
    with pytest.raises(OSError, match="cannot scope the sandbox with Landlock: Landlock is disab"):
        ConfinedStarts().run(lambda: started.append(True))
    assert started == []
    # Said as it is where a server fails to start, not as a command it may not run.
    with pytest.raises(OSError) as caught:
        ConfinedStarts().run(lambda: started.append(True))
    assert not isinstance(caught.value, PermissionError)
    failed = process._spawn_error("files", "/usr/bin/bwrap", None, caught.value)
    assert "cannot scope the sandbox with Landlock" in str(failed), failed
