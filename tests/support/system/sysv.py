"""SysV shared memory as another program of the user keeps it (an X server's MIT-SHM
buffers, PostgreSQL's): a private segment made and removed by the test itself, and
the keys of those the host lists, for what a server may have left there."""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import msgspec

IPC_CREAT, IPC_RMID = 0o1000, 0

_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = ctypes.c_void_p
_libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
_libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
_libc.shmdt.argtypes = [ctypes.c_void_p]
_libc.shmctl.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]


class Segment(msgspec.Struct, frozen=True):
    shmid: int
    key: int


def fresh_key() -> int:
    """A key no other test run picks: a segment or a queue made under it is the test's."""
    return 0x4D500000 + secrets.randbelow(1 << 20)


def _failed(call: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"{call}: {os.strerror(errno)}")


@contextlib.contextmanager
def holding(text: str) -> Iterator[Segment]:
    """A 0600 segment under a fresh key holding ``text``, removed when done."""
    key = fresh_key()
    shmid = _libc.shmget(key, 4096, IPC_CREAT | 0o600)
    if shmid < 0:
        raise _failed("shmget")
    try:
        where = _libc.shmat(shmid, None, 0)
        if where in (None, ctypes.c_void_p(-1).value):
            raise _failed("shmat")
        ctypes.memmove(where, text.encode(), len(text))
        _libc.shmdt(where)
        yield Segment(shmid, key)
    finally:
        _libc.shmctl(shmid, IPC_RMID, None)


def listed() -> dict[int, int]:
    """The segments the host lists, by key: their ids."""
    rows = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return {int(row.split()[0]): int(row.split()[1]) for row in rows}


def queues() -> set[int]:
    """The keys of the message queues the host lists."""
    rows = Path("/proc/sysvipc/msg").read_text().splitlines()[1:]
    return {int(row.split()[0]) for row in rows}


def remove_listed(keys: set[int]) -> None:
    """Removes what the host lists under ``keys``: what a server left behind."""
    for key, shmid in listed().items():
        if key in keys:
            _libc.shmctl(shmid, IPC_RMID, None)
    for key in keys & queues():
        qid = _libc.msgget(key, 0)
        if qid >= 0:
            _libc.msgctl(qid, IPC_RMID, None)
