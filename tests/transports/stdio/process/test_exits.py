"""Why a stdio server's process ended, in words: the signal that killed it, its exit
status (bubblewrap's 128 + N said as the signal it stands for), and the limit it ran
into, named by the key that sets it, only when that limit is in force: as the kernel's
word where the kernel tells, else as the word of the final error the server died of."""

from __future__ import annotations

import signal

import pytest

from transports.stdio.process.exits import (
    ProcessEnd,
    describe_exit,
    exit_reason,
    limit_reached,
    shown_limit,
)
from transports.stdio.sandbox.limits import Limits

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
        # bubblewrap's status for a command killed by a signal, or a command's own.
        (137, True, "exited with status 137 (as a process killed by SIGKILL would)"),
        (137, False, "exited with status 137"),  # no bubblewrap: a status like another
        (128, True, "exited with status 128"),
        (-200, False, "was killed by signal 200"),
    ],
)
def test_how_a_process_ended_is_said(code: int | None, sandboxed: bool, said: str) -> None:
    assert describe_exit(code, sandboxed=sandboxed) == said


XCPU = 128 + signal.SIGXCPU


def test_the_cpu_limit_is_named_when_the_kernel_killed_it_with_sigxcpu() -> None:
    assert exit_reason(-signal.SIGXCPU, LIMITS, [], sandboxed=False) == (
        "was killed by SIGXCPU: it reached its limit limits.cpu = 30 s"
    )
    # In a sandbox, as its cgroup counted the CPU time the limit allows.
    spent = ProcessEnd(cpu_seconds=30.5, lived=31.0)
    assert exit_reason(XCPU, LIMITS, [], sandboxed=True, ending=spent) == (
        "was killed by SIGXCPU: it reached its limit limits.cpu = 30 s"
    )
    assert limit_reached(XCPU, Limits(), [], sandboxed=True, ending=spent) is None


def test_a_sandboxed_status_of_sigxcpu_that_cannot_be_the_limit_names_none() -> None:
    # exit(152) after a fifth of a second: no CPU could have spent 600 s by then.
    limits = Limits(cpu=600, keys={"cpu": "servers.b.limits.cpu"})
    quick = ProcessEnd(lived=0.2)
    assert exit_reason(XCPU, limits, [], sandboxed=True, ending=quick) == (
        "exited with status 152 (as a process killed by SIGXCPU would)"
    )
    # Its cgroup counted less than the limit, however long it ran.
    idle = ProcessEnd(cpu_seconds=1.0, lived=4000.0)
    assert limit_reached(XCPU, limits, [], sandboxed=True, ending=idle) is None


def test_a_sandboxed_status_of_sigxcpu_that_may_be_the_limit_says_it_may() -> None:
    long = ProcessEnd(lived=4000.0)
    assert exit_reason(XCPU, LIMITS, [], sandboxed=True, ending=long) == (
        "exited with status 152 (as a process killed by SIGXCPU would): "
        "it may have reached its limit limits.cpu = 30 s"
    )


SAID = "its last error on stderr says it reached its limit"


@pytest.mark.parametrize(
    ("stderr", "hit"),
    [
        (["Traceback ...", "MemoryError"], "servers.s.limits.memory = 512 MiB"),
        (["fatal: Out of memory"], "servers.s.limits.memory = 512 MiB"),
        (["OSError: [Errno 24] Too many open files"], "limits.open_files = 256"),
        (["bash: fork: retry: Resource temporarily unavailable"], "limits.processes = 64"),
        # C++: the what() line is indented under the error.
        (
            ["terminate called after throwing an instance of 'std::bad_alloc'", "  what():  x"],
            "servers.s.limits.memory = 512 MiB",
        ),
        # Node: an error's frames and its dump, then the runtime's version.
        (
            [
                "Error: EMFILE: too many open files, open '/tmp/x'",
                "    at Object.openSync (node:fs:573:18) {",
                "  errno: -24,",
                "}",
                "",
                "Node.js v20.11.0",
            ],
            "limits.open_files = 256",
        ),
        (
            [
                "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
                " 1: 0xb7b3e0 node::Abort() [node]",
            ],
            "servers.s.limits.memory = 512 MiB",
        ),
        # The JVM: frames indented by a tab.
        (
            [
                'Exception in thread "main" java.lang.OutOfMemoryError: Java heap space',
                "\tat Main.main(Main.java:5)",
            ],
            "servers.s.limits.memory = 512 MiB",
        ),
        # Go: the runtime's lines above its fatal error, then the crash dump.
        (
            [
                "runtime: failed to create new OS thread (have 9 already; errno=11)",
                "runtime: may need to increase max user processes (ulimit -u)",
                "fatal error: newosproc",
                "",
                "runtime stack:",
                "runtime.throw({0x4b8a2e?, 0x0?})",
                "\t/usr/lib/go/src/runtime/panic.go:1077 +0x5c fp=0x7ffd sp=0x7ffd pc=0x4324dc",
                "goroutine 1 [running]:",
                "main.main()",
            ],
            "limits.processes = 64",
        ),
        (
            [
                "runtime/cgo: pthread_create failed: Resource temporarily unavailable",
                "SIGABRT: abort",
                "PC=0x7f8c m=3 sigcode=18446744073709551610",
                "",
                "goroutine 0 [idle]:",
                "runtime: g 0: unknown pc 0x7f8c",
            ],
            "limits.processes = 64",
        ),
    ],
)
def test_a_limit_is_read_from_the_final_error_the_server_died_of(
    stderr: list[str], hit: str
) -> None:
    assert exit_reason(1, LIMITS, stderr, sandboxed=True) == f"exited with status 1: {SAID} {hit}"


@pytest.mark.parametrize(
    "stderr",
    [
        # The words of a limit in the log, before an error that is not about one.
        ["poll: EAGAIN on read, retrying", "Traceback ...", "KeyError: 'config'"],
        ["CUDA out of memory, trying a smaller batch", "ValueError: bad arg"],
        ["BlockingIOError: [Errno 11] read would block; retrying", "fatal: config not found"],
        ["KeyError: 'API_KEY'"],
        [],
    ],
)
def test_an_exit_whose_final_error_says_nothing_of_a_limit_blames_none(stderr: list[str]) -> None:
    assert limit_reached(1, LIMITS, stderr, sandboxed=True) is None
    assert exit_reason(1, LIMITS, stderr, sandboxed=False) == "exited with status 1"


def test_a_fork_its_pids_cgroup_refused_names_the_process_limit_whatever_it_said() -> None:
    refused = ProcessEnd(refused_forks=3)
    stderr = ["KeyError: 'config'"]
    assert exit_reason(1, LIMITS, stderr, sandboxed=False, ending=refused) == (
        "exited with status 1: it reached its limit limits.processes = 64"
    )


def test_a_pids_cgroup_that_refused_nothing_rules_the_process_limit_out() -> None:
    none = ProcessEnd(refused_forks=0)
    stderr = ["BlockingIOError: [Errno 11] Resource temporarily unavailable"]
    assert limit_reached(1, LIMITS, stderr, sandboxed=False, ending=none) is None
    # The other limits are still read from its last words.
    said = limit_reached(1, LIMITS, ["MemoryError"], sandboxed=False, ending=none)
    assert said is not None and (said.limit, said.sure) == (
        "servers.s.limits.memory = 512 MiB",
        "said",
    )


def test_a_limit_not_in_force_is_never_blamed() -> None:
    stderr = ["MemoryError"]
    assert limit_reached(1, Limits(processes=64), stderr, sandboxed=True) is None
    assert exit_reason(1, None, stderr, sandboxed=True) == "exited with status 1"
    assert limit_reached(None, LIMITS, stderr, sandboxed=True) is None
    assert (
        limit_reached(1, Limits(), [], sandboxed=True, ending=ProcessEnd(refused_forks=5)) is None
    )


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
    assert shown_limit(name, value) == text
