"""The limits a stdio server's config sets, as ``prlimit``'s command line: only what is
set, the open files never above mcpd's own hard limit, the process limit only where it
can count the server's own, and a second's grace past the CPU limit."""

from __future__ import annotations

from transports.stdio.sandbox.limits import Limits, prlimit_args

PRLIMIT = "/usr/bin/prlimit"


def test_no_limit_set_or_no_prlimit_adds_nothing() -> None:
    assert prlimit_args(Limits(), PRLIMIT, None, processes=True) == []
    assert prlimit_args(Limits(memory=1 << 30), None, None, processes=True) == []


def test_each_limit_set_becomes_its_option() -> None:
    limits = Limits(memory=1 << 30, processes=64, open_files=256, cpu=30)
    assert prlimit_args(limits, PRLIMIT, None, processes=True) == [
        PRLIMIT,
        f"--data={1 << 30}",
        "--nproc=64",
        "--nofile=256",
        "--cpu=30:31",
        "--",
    ]


def test_open_files_stay_within_mcpds_own_hard_limit() -> None:
    assert prlimit_args(Limits(open_files=4096), PRLIMIT, 1024, processes=True) == [
        PRLIMIT,
        "--nofile=1024",
        "--",
    ]
    assert prlimit_args(Limits(open_files=64), PRLIMIT, 1024, processes=True)[1] == "--nofile=64"


def test_the_process_limit_is_left_out_where_it_would_count_every_process_of_the_user() -> None:
    assert prlimit_args(Limits(processes=64), PRLIMIT, None, processes=False) == []
    assert prlimit_args(Limits(processes=64, cpu=5), PRLIMIT, None, processes=False) == [
        PRLIMIT,
        "--cpu=5:6",
        "--",
    ]


def test_a_limit_is_named_by_the_key_that_set_it() -> None:
    limits = Limits(memory=1, keys={"memory": "daemon.limits.memory"})
    assert limits.key("memory") == "daemon.limits.memory"
    assert limits.key("cpu") == "limits.cpu"
    assert limits.any() and not Limits().any()
