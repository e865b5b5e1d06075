"""The error a stdio server died of, read from the tail of its stderr (``final_error``),
and the limit that error names (``limit_said``): what runtimes write after their error
is passed over, a Go crash dump is read to its ``fatal error``, and a limit mentioned
before the end blames nothing."""

from __future__ import annotations

import pytest

from transports.stdio.process.last_words import final_error, limit_said

ALL = ("memory", "processes", "open_files")


@pytest.mark.parametrize(
    ("stderr", "error"),
    [
        ([], []),
        (["", "   "], []),
        (["starting", "MemoryError"], ["MemoryError"]),
        (
            ["Traceback (most recent call last):", '  File "s.py", line 3', "OSError: [Errno 24]"],
            ["OSError: [Errno 24]"],
        ),
        (
            [
                "Error: EMFILE: too many open files",
                "    at open (fs.js:1)",
                "}",
                "",
                "Node.js v20.1.0",
            ],
            ["Error: EMFILE: too many open files"],
        ),
        (["panic: boom", "exit status 2"], ["panic: boom"]),
        (
            [
                "runtime: out of memory: cannot allocate 1048576-byte block",
                "runtime: sp=0x1 stack=[0x1, 0x2]",
                "fatal error: out of memory",
                "",
                "runtime stack:",
                "runtime.throw(...)",
            ],
            [
                "runtime: out of memory: cannot allocate 1048576-byte block",
                "runtime: sp=0x1 stack=[0x1, 0x2]",
                "fatal error: out of memory",
            ],
        ),
        (
            [
                "fatal error: unexpected signal during runtime execution",
                "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x0]",
                "",
                "goroutine 1 [running]:",
                "main.main()",
            ],
            ["fatal error: unexpected signal during runtime execution"],
        ),
        (["note: runtime: not go", "fatal error: x"], ["fatal error: x"]),
        (["runtime.main()", "runtime: why", "fatal error: x"], ["runtime: why", "fatal error: x"]),
    ],
    ids=[
        "nothing",
        "blank",
        "python",
        "traceback",
        "node",
        "go-run",
        "go-oom",
        "go-signal",
        "runtime-not-first",
        "runtime-frame",
    ],
)
def test_the_final_error_is_the_last_line_but_for_what_follows_an_error(
    stderr: list[str], error: list[str]
) -> None:
    assert final_error(stderr) == error


@pytest.mark.parametrize(
    ("last", "limit"),
    [
        ("MemoryError", "memory"),
        ("terminate called after throwing an instance of 'std::bad_alloc'", "memory"),
        ("java.lang.OutOfMemoryError: Java heap space", "memory"),
        ("memory allocation of 1024 bytes failed", "memory"),
        ("BlockingIOError: [Errno 11] Resource temporarily unavailable", "processes"),
        ("bash: fork: retry: Resource temporarily unavailable", "processes"),
        ("runtime: failed to create new OS thread", "processes"),
        ("OSError: [Errno 24] Too many open files", "open_files"),
        ("Error: EMFILE, open 'x'", "open_files"),
        ("ValueError: bad input", None),
    ],
)
def test_the_limit_is_read_from_the_final_errors_words(last: str, limit: str | None) -> None:
    assert limit_said(["starting", last], ALL) == limit


def test_only_the_limits_asked_about_are_named_in_their_order() -> None:
    both = ["OSError: out of memory; too many open files"]
    assert limit_said(both, ALL) == "memory"
    assert limit_said(both, ("open_files", "memory")) == "open_files"
    assert limit_said(both, ("processes",)) is None
    assert limit_said(both, ("cpu",)) is None


def test_a_limit_mentioned_before_the_end_blames_nothing() -> None:
    stderr = ["warning: EAGAIN on read, retrying", "out of memory? no, fine", "exiting: done"]
    assert limit_said(stderr, ALL) is None


def test_nothing_on_stderr_names_no_limit() -> None:
    assert limit_said([], ALL) is None
    assert limit_said(["", "  at x"], ALL) is None
