"""The filter that refuses sandboxed servers the kernel's keyrings: which calls it
refuses on each architecture these machines run (read by a small evaluator of the
filter's instructions), and, installed on a thread here, what that thread starts."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import threading

import pytest

from tests.support.system import keyrings
from transports.stdio.sandbox import keyring_filter
from transports.stdio.sandbox.keyring_filter import (
    ALLOW,
    AND,
    CALLS,
    JUMP_IF_EQUAL,
    LOAD,
    REFUSE,
    RETURN,
    X32_BIT,
)

X86_64, I386, AARCH64, ARM = CALLS


def verdict(arch: int, number: int) -> int:
    """What the filter returns for a call: classic BPF, as the kernel runs it."""
    fields = {0: number, 4: arch}
    ops = keyring_filter.filter_instructions()
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = ops[pc]
        pc += 1
        if code == LOAD:
            acc = fields[k]
        elif code == AND:
            acc &= k
        elif code == JUMP_IF_EQUAL:
            pc += jt if acc == k else jf
        elif code == RETURN:
            return k
        else:
            raise AssertionError(f"an instruction the evaluator does not know: {code:#x}")


@pytest.mark.parametrize("arch", list(CALLS))
def test_add_key_request_key_and_keyctl_are_refused_on_every_architecture(arch: int) -> None:
    for number in CALLS[arch]:
        assert verdict(arch, number) == REFUSE, (hex(arch), number)


def test_an_x32_program_is_refused_them_by_their_x32_numbers() -> None:
    for number in CALLS[X86_64]:
        assert verdict(X86_64, number | X32_BIT) == REFUSE


def test_every_other_call_is_allowed() -> None:
    # The same numbers name other calls on another architecture: i386's keyctl is
    # x86_64's accept4, arm's add_key is aarch64's nothing at all.
    assert verdict(X86_64, CALLS[I386][2]) == ALLOW
    assert verdict(AARCH64, CALLS[ARM][0]) == ALLOW
    for arch in CALLS:
        for number in (0, 1, 59, 221, 435):
            if number not in CALLS[arch]:
                assert verdict(arch, number) == ALLOW, (hex(arch), number)


def test_the_instructions_are_as_the_kernel_reads_them() -> None:
    code = keyring_filter.program()
    assert len(code) == 8 * len(keyring_filter.filter_instructions())
    # A jump is one byte: every one stays inside the program.
    ops = keyring_filter.filter_instructions()
    for i, (op, jt, jf, _) in enumerate(ops):
        if op == JUMP_IF_EQUAL:
            assert i + 1 + max(jt, jf) < len(ops)
    assert ops[-1][0] == RETURN


def started_under_the_filter() -> tuple[str, str]:
    """What a child of a thread that entered the filter says, and what the thread says."""
    said: list[str] = []

    def thread() -> None:
        keyring_filter.enter()
        child = subprocess.run(
            [sys.executable, "-I", "-S", "-c", keyrings.PROBE],
            capture_output=True,
            text=True,
            timeout=30,
        )
        said.append(child.stdout.strip() or child.stderr)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        said.append("refused" if libc.syscall(keyrings.KEYCTL, 0, ctypes.c_int(-3), 0) < 0 else "")

    t = threading.Thread(target=thread)
    t.start()
    t.join()
    return said[0], said[1]


def test_what_a_filtered_thread_starts_may_not_use_the_keyrings() -> None:
    if not keyrings.KNOWN:
        pytest.skip("the keyrings' system calls are not known on this machine")
    child, thread = started_under_the_filter()
    assert child == "refused" and thread == "refused"
    # The other threads, the test's own here, are not under it.
    mine = subprocess.run(
        [sys.executable, "-I", "-S", "-c", keyrings.PROBE], capture_output=True, text=True
    )
    assert mine.stdout.startswith("allowed "), mine
