"""A stdio MCP server that keeps memory where none of its limits counts it, and reaches
for what other programs keep there: SysV shared memory and message queues (its own,
and those it finds by id or key), and files in the memory filesystems its sandbox
gives it (``/dev/shm``, ``/tmp``, ``/dev`` itself, the covers of what it hides,
a strict sandbox's root). It also uses what a program there
needs to keep working: ``/dev/null``, a pseudo-terminal, POSIX shared memory.

Each call answers with one line, ``ok: what`` or ``refused: why``, so that a test
reads the outcome from the result. Plain stdlib, run by its path, legacy handshake.
"""

from __future__ import annotations

import _posixshmem  # type: ignore[import-not-found]
import ctypes
import json
import mmap
import os
import sys
from typing import Any

IPC_CREAT, IPC_RMID, SHM_RDONLY = 0o1000, 0, 0o10000
MIB = 1 << 20

libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
libc.shmctl.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]


def attempt(action: Any) -> str:
    try:
        return f"ok: {action()}"
    except BaseException as exc:  # the outcome is data
        return f"refused: {type(exc).__name__}: {exc}"


def failed(call: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"{call}: {os.strerror(errno)}")


def segments() -> str:
    """The keys of the SysV shared memory segments it can list."""
    with open("/proc/sysvipc/shm") as f:
        rows = [line.split() for line in f.read().splitlines()[1:]]
    return "segments " + " ".join(row[0] for row in rows)


def attach(shmid: int) -> str:
    """The start of segment ``shmid``, attached read-only."""
    where = libc.shmat(shmid, None, SHM_RDONLY)
    if where in (None, ctypes.c_void_p(-1).value):
        raise failed("shmat")
    try:
        return "read " + ctypes.string_at(where, 64).split(b"\0")[0].decode()
    finally:
        libc.shmdt(where)


def find(key: int) -> str:
    shmid = libc.shmget(key, 0, 0)
    if shmid < 0:
        raise failed("shmget")
    return f"found segment {shmid}"


def make(key: int, size: int) -> str:
    """A segment of ``size`` bytes under ``key``, every page written, then let go of."""
    shmid = libc.shmget(key, size, IPC_CREAT | 0o600)
    if shmid < 0:
        raise failed("shmget")
    where = libc.shmat(shmid, None, 0)
    if where in (None, ctypes.c_void_p(-1).value):
        raise failed("shmat")
    ctypes.memset(where, 1, size)
    libc.shmdt(where)
    return f"made segment {shmid}"


def remove(shmid: int) -> str:
    if libc.shmctl(shmid, IPC_RMID, None) != 0:
        raise failed("shmctl(IPC_RMID)")
    return f"removed segment {shmid}"


def make_queue(key: int) -> str:
    if libc.msgget(key, IPC_CREAT | 0o600) < 0:
        raise failed("msgget")
    return f"made queue {key}"


def find_queue(key: int) -> str:
    qid = libc.msgget(key, 0)
    if qid < 0:
        raise failed("msgget")
    return f"found queue {qid}"


def fill(path: str, mib: int) -> str:
    """Writes ``mib`` MiB to ``path``; raises with how much went in first."""
    written = 0
    block = b"x" * MIB
    try:
        with open(path, "wb") as f:
            for _ in range(mib):
                f.write(block)
                f.flush()
                written += 1
    except OSError as exc:
        raise OSError(exc.errno, f"{exc.strerror} after {written} MiB") from None
    finally:
        if os.path.exists(path):
            os.unlink(path)  # the bound is what is tested, not what stays
    return f"wrote {written} MiB"


def create(path: str) -> str:
    with open(path, "w") as f:
        f.write("x")
    return f"wrote {path}"


def open_up(path: str) -> str:
    """Makes the directory at ``path`` its own to write, as its owner may."""
    os.chmod(path, 0o700)
    return f"opened up {path}"


def through_pty() -> str:
    """A line written to a new pseudo-terminal's device, read back at its master."""
    master, device = os.openpty()
    try:
        os.write(device, b"through\n")
        return "read " + os.read(master, 64).decode().strip()
    finally:
        os.close(master)
        os.close(device)


def posix_shm() -> str:
    """A POSIX shared memory object made, mapped, written and read through a second
    mapping, then removed."""
    name = f"/hoarding-{os.getpid()}"
    fd = _posixshmem.shm_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, MIB)
        with mmap.mmap(fd, MIB) as first, mmap.mmap(fd, MIB) as second:
            first[:5] = b"held!"
            got = second[:5].decode()
    finally:
        os.close(fd)
        _posixshmem.shm_unlink(name)
    return f"read {got} through {name}"


TOOLS: dict[str, Any] = {
    "segments": lambda a: attempt(segments),
    "attach": lambda a: attempt(lambda: attach(int(a["id"]))),
    "find": lambda a: attempt(lambda: find(int(a["key"]))),
    "make": lambda a: attempt(lambda: make(int(a["key"]), int(a["bytes"]))),
    "remove": lambda a: attempt(lambda: remove(int(a["id"]))),
    "make_queue": lambda a: attempt(lambda: make_queue(int(a["key"]))),
    "find_queue": lambda a: attempt(lambda: find_queue(int(a["key"]))),
    "fill": lambda a: attempt(lambda: fill(a["path"], int(a["mib"]))),
    "create": lambda a: attempt(lambda: create(a["path"])),
    "open_up": lambda a: attempt(lambda: open_up(a["path"])),
    "pty": lambda a: attempt(through_pty),
    "posix_shm": lambda a: attempt(posix_shm),
    "quit": lambda a: os._exit(3),
}


def reply(rid: Any, result: Any) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        rid, method = msg.get("id"), msg.get("method")
        if rid is None:
            continue
        if method == "initialize":
            info = {"name": "hoarding", "version": "1"}
            reply(
                rid,
                {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {}},
                    "serverInfo": info,
                },
            )
        elif method == "tools/list":
            reply(rid, {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]})
        elif method == "tools/call":
            params = msg.get("params") or {}
            text = TOOLS[params["name"]](params.get("arguments") or {})
            reply(rid, {"content": [{"type": "text", "text": text}]})
        elif method == "ping":
            reply(rid, {})
        else:
            error = {"code": -32601, "message": f"no method {method}"}
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
