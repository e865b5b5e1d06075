"""Why a stdio server's process ended, in words: the signal that killed it (bubblewrap's
128 + N read as signal N), its exit status, and the limit it ran into, named by the key
that sets it, only when that limit is in force."""

from __future__ import annotations

import signal

import pytest

from transports.stdio.exits import describe_exit, exit_reason, limit_reached, shown
from transports.stdio.limits import Limits

LIMITS = Limits(
    memory=512 << 20,
    processes=64,
    open_files=256,
    cpu=30,
    keys={"memory": "servers.s.limits.memory"},
)


@pytest.mark.parametrize(
    ("code", "sandboxed", "said"),
    [
        (None, False, "is still running"),
        (0, False, "exited with status 0"),
        (3, True, "exited with status 3"),
        (-9, False, "was killed by SIGKILL"),
        (137, True, "was killed by SIGKILL"),
        (137, False, "exited with status 137"),  # no bubblewrap: a status like another
        (128, True, "exited with status 128"),
        (-200, False, "was killed by signal 200"),
    ],
)
def test_how_a_process_ended_is_said(code: int | None, sandboxed: bool, said: str) -> None:
    assert describe_exit(code, sandboxed=sandboxed) == said


def test_the_cpu_limit_is_named_when_sigxcpu_killed_it() -> None:
    code = 128 + signal.SIGXCPU
    assert limit_reached(code, LIMITS, [], sandboxed=True) == "limits.cpu = 30 s"
    assert exit_reason(code, LIMITS, [], sandboxed=True) == (
        "was killed by SIGXCPU: it reached its limit limits.cpu = 30 s"
    )
    assert limit_reached(code, Limits(), [], sandboxed=True) is None


@pytest.mark.parametrize(
    ("stderr", "hit"),
    [
        (["Traceback ...", "MemoryError"], "servers.s.limits.memory = 512 MiB"),
        (["fatal: Out of memory"], "servers.s.limits.memory = 512 MiB"),
        (["OSError: [Errno 24] Too many open files"], "limits.open_files = 256"),
        (["bash: fork: retry: Resource temporarily unavailable"], "limits.processes = 64"),
    ],
)
def test_a_limit_is_read_from_what_the_runtime_said_as_it_died(stderr: list[str], hit: str) -> None:
    assert limit_reached(1, LIMITS, stderr, sandboxed=True) == hit
    assert exit_reason(1, LIMITS, stderr, sandboxed=True) == (
        f"exited with status 1: it reached its limit {hit}"
    )


def test_a_limit_not_in_force_is_never_blamed() -> None:
    stderr = ["MemoryError", "Too many open files"]
    assert limit_reached(1, Limits(processes=64), stderr, sandboxed=True) is None
    assert exit_reason(1, None, stderr, sandboxed=True) == "exited with status 1"
    assert limit_reached(None, LIMITS, stderr, sandboxed=True) is None


def test_an_exit_that_says_nothing_of_a_limit_blames_none() -> None:
    assert limit_reached(1, LIMITS, ["KeyError: 'API_KEY'"], sandboxed=True) is None


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        ("memory", 4 << 30, "4 GiB"),
        ("memory", 1536 << 20, "1536 MiB"),
        ("memory", 3 << 10, "3 KiB"),
        ("memory", 1000, "1000 bytes"),
        ("memory", (1 << 30) + 1, f"{(1 << 30) + 1} bytes"),
        ("cpu", 5, "5 s"),
        ("processes", 10, "10"),
    ],
)
def test_a_limits_value_is_shown_in_its_unit(name: str, value: int, text: str) -> None:
    assert shown(name, value) == text
