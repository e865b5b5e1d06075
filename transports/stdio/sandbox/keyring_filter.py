"""The kernel's keyrings refused to sandboxed servers: a seccomp filter, installed on the
threads of mcpd that start them (``confined``), which everything they start inherits.

Keys are not namespaced. A server in user namespaces of its own still holds the session
keyring mcpd was started with (a user manager's, or the one a login's pam_keyinit
made, where cifscreds passwords and Kerberos tickets are kept): it could read the keys
in it and add keys of its own, which mcpd and every other server would then hold too.
A session keyring of the server's own would not be enough: its user's keyrings are
its to view (``/proc/keys`` lists them), and its user's own keyring is its to link
into one it holds, which makes every key in it readable. So a sandboxed server may not
call add_key, request_key or keyctl at all: each fails with EPERM, as it does in most
containers. request_key would also have the kernel run a helper outside any sandbox.

The filter tells the calls apart by architecture as well as by number, so that a
32-bit program (or an x32 one) cannot make the same calls by their other numbers.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from typing import Final

_X86_64: Final = 0xC000003E
# Each architecture (AUDIT_ARCH_*) a kernel of the machines below runs programs for,
# with its numbers of add_key, request_key and keyctl.
CALLS: Final = {
    _X86_64: (248, 249, 250),
    0x40000003: (286, 287, 288),  # i386
    0xC00000B7: (217, 218, 219),  # aarch64
    0x40000028: (309, 310, 311),  # arm
}
MACHINES: Final = ("x86_64", "aarch64")
# An x32 program's calls come as x86_64's, their numbers with this bit set.
X32_BIT: Final = 0x40000000

# Classic BPF over struct seccomp_data: the call's number at offset 0, its arch at 4.
LOAD: Final = 0x20  # BPF_LD | BPF_W | BPF_ABS
JUMP_IF_EQUAL: Final = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
AND: Final = 0x54  # BPF_ALU | BPF_AND | BPF_K
RETURN: Final = 0x06  # BPF_RET | BPF_K
ALLOW: Final = 0x7FFF0000
REFUSE: Final = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO

_PR_SET_SECCOMP: Final = 22
_PR_SET_NO_NEW_PRIVS: Final = 38
_SECCOMP_MODE_FILTER: Final = 2

Instruction = tuple[int, int, int, int]  # code, jump if true, jump if false, k


def filter_instructions() -> list[Instruction]:
    """The filter, one ``struct sock_filter`` each; jumps count the instructions skipped."""
    blocks = []
    for arch, numbers in CALLS.items():
        load: list[Instruction] = [(LOAD, 0, 0, 0)]
        if arch == _X86_64:
            load.append((AND, 0, 0, 0xFFFFFFFF ^ X32_BIT))
        blocks.append((arch, load, numbers))
    refuse = 1 + sum(2 + len(load) + len(numbers) for _, load, numbers in blocks) + 1
    out: list[Instruction] = [(LOAD, 0, 0, 4)]
    for arch, load, numbers in blocks:
        out.append((JUMP_IF_EQUAL, 0, len(load) + len(numbers) + 1, arch))
        out += load
        for number in numbers:
            out.append((JUMP_IF_EQUAL, refuse - len(out) - 1, 0, number))
        out.append((RETURN, 0, 0, ALLOW))
    # No other architecture runs on these machines.
    out.append((RETURN, 0, 0, ALLOW))
    out.append((RETURN, 0, 0, REFUSE))
    return out


def program() -> bytes:
    return b"".join(struct.pack("=HBBI", *op) for op in filter_instructions())


class _Program(ctypes.Structure):  # struct sock_fprog
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def enter() -> None:
    """Refuse the calling thread, and what it starts from now on, the keyrings' calls.
    Raises OSError when the kernel refuses or the machine is not one it knows."""
    machine = os.uname().machine
    if machine not in MACHINES:
        raise OSError(f"the keyrings' system calls are not known on {machine}")
    code = program()
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _Program(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    zero = ctypes.c_ulong(0)
    # A filter asks it of a thread without CAP_SYS_ADMIN; bubblewrap sets it anyway.
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), zero, zero, zero) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
    mode = ctypes.c_ulong(_SECCOMP_MODE_FILTER)
    if libc.prctl(_PR_SET_SECCOMP, mode, ctypes.byref(prog), zero, zero) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_SECCOMP): {os.strerror(err)}")
