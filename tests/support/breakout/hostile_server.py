"""A stdio MCP server that attacks what is around it, one tool per attack.

It speaks the legacy handshake (``initialize``) and answers every call with one line
of text that says what it managed and what it met, so a test reads the outcome from
the result. ``echo`` is its ordinary tool: it must keep answering whatever the
attacks met. Plain stdlib, run by its path (no test code on its path in a sandbox);
its attacks through sockets are in ``hostile_sockets.py`` beside it.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys
import time
from typing import Any

# Beside this file, which is the first entry of the path it runs with.
from hostile_sockets import (
    abstract,
    abstract_own,
    abstract_serve,
    agent_keys,
    connect,
    connect_unix,
    hold_many,
    mcp_post,
    receive,
    send_datagram,
)


def attempt(action: Any) -> str:
    """``ok: what`` when the action succeeded, ``refused: why`` when it raised."""
    try:
        return f"ok: {action()}"
    except BaseException as exc:  # MemoryError, OSError, anything: the outcome is data
        return f"refused: {type(exc).__name__}: {exc}"


def read_file(path: str) -> str:
    with open(path, "rb") as f:
        return f.read(4096).decode("utf-8", "replace")


def write_file(path: str, text: str) -> str:
    with open(path, "w") as f:
        f.write(text)
    return f"wrote {path}"


def rewrite(path: str) -> str:
    """Writes back what the file holds: a write that changes nothing, yet needs the right."""
    with open(path, "rb") as f:
        held = f.read(4096)
    with open(path, "wb") as f:
        f.write(held)
    return f"rewrote {path}"


def relink(path: str, target: str) -> str:
    """Points the symbolic link at ``path`` to ``target``, replacing it in one rename."""
    os.symlink(target, path + ".new")
    os.rename(path + ".new", path)
    return f"{path} -> {target}"


def own_cgroup_afresh(name: str) -> str:
    """Rewrites ``name`` (``pids.max``) of its own pids cgroup through a cgroup
    filesystem it mounts itself, in user, mount and cgroup namespaces it makes, where
    its own cgroup is the root."""
    return in_child(lambda: _remount_own_cgroup(name))


def in_child(action: Any) -> str:
    """What ``action`` returned in a child it forks, so that the server stays as it was;
    raises PermissionError with what it raised there."""
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(reader)
        try:
            os.write(writer, f"ok: {action()}".encode())
        except BaseException as exc:
            os.write(writer, f"refused: {type(exc).__name__}: {exc}".encode())
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as f:
        got = f.read().decode("utf-8", "replace")
    os.waitpid(child, 0)
    if not got.startswith("ok: "):
        raise PermissionError(got.removeprefix("refused: "))
    return got.removeprefix("ok: ")


def make_user_namespace() -> str:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        errno = ctypes.get_errno()
        raise OSError(errno, f"unshare: {os.strerror(errno)}")
    return "made a user namespace"


# keyctl and add_key on the machines the tests run on.
KEY_CALLS = {"x86_64": (250, 248), "aarch64": (219, 217)}
SESSION_KEYRING = -3


def _keys() -> tuple[Any, int, int]:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    keyctl, add_key = KEY_CALLS[os.uname().machine]
    return libc, keyctl, add_key


def _key_error(call: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"{call}: {os.strerror(errno)}")


def session_key(description: str) -> str:
    """The payload of the ``user`` key ``description`` its session keyring holds."""
    libc, keyctl, _ = _keys()
    search, read = 10, 11  # KEYCTL_SEARCH, KEYCTL_READ
    key = libc.syscall(
        keyctl, search, ctypes.c_int(SESSION_KEYRING), b"user", description.encode(), 0
    )
    if key < 0:
        raise _key_error("keyctl(KEYCTL_SEARCH)")
    buf = ctypes.create_string_buffer(4096)
    size = libc.syscall(keyctl, read, ctypes.c_long(key), buf, 4096)
    if size < 0:
        raise _key_error("keyctl(KEYCTL_READ)")
    return f"read {buf.raw[:size].decode('utf-8', 'replace')}"


def add_session_key(description: str, payload: str) -> str:
    libc, _, add_key = _keys()
    data = payload.encode()
    key = libc.syscall(
        add_key, b"user", description.encode(), data, len(data), ctypes.c_int(SESSION_KEYRING)
    )
    if key < 0:
        raise _key_error("add_key")
    return f"added key {key}"


def _remount_own_cgroup(name: str) -> str:
    libc = ctypes.CDLL(None, use_errno=True)
    new_user, new_mount, new_cgroup = 0x10000000, 0x00020000, 0x02000000
    if libc.unshare(new_user | new_mount | new_cgroup) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"unshare: {os.strerror(errno)}")
    with open("/proc/self/cgroup") as f:
        v1 = any(":pids:" in line for line in f)
    where = os.path.join(os.environ["HOME"], "cgroup-afresh")
    os.makedirs(where, exist_ok=True)
    fstype, options = (b"cgroup", b"pids") if v1 else (b"cgroup2", None)
    if libc.mount(b"none", where.encode(), fstype, 0, options) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {fstype.decode()}: {os.strerror(errno)}")
    return rewrite(os.path.join(where, name))


def scan_environ(needle: str) -> str:
    """Every process whose environment it can read that carries ``needle``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle.encode() in f.read():
                    found.append(entry)
        except OSError:
            continue
    if found:
        return f"found in the environment of pids {', '.join(found)}"
    raise LookupError("in no environment it can read")


def ask_reload(path: str, through_exited_child: bool = False) -> str:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        if through_exited_child:
            # The kernel names the child as the peer; by the time mcpd looks it up, it
            # has exited and been reaped, and its pid names nobody.
            child = os.fork()
            if child == 0:
                s.connect(path)
                os._exit(0)
            os.waitpid(child, 0)
        else:
            s.connect(path)
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        request = {"jsonrpc": "2.0", "id": 1, "method": "mcpd/reload", "params": {"_meta": meta}}
        s.sendall(json.dumps(request).encode() + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            data = s.recv(65536)
            if not data:
                break
            reply += data
    answer = json.loads(reply) if reply else {}
    if "result" not in answer:
        raise PermissionError(json.dumps(answer.get("error") or "no answer"))
    return json.dumps(answer["result"])


def kill(pid: int) -> str:
    outcomes = []
    for target in (pid, os.getppid()):
        try:
            os.kill(target, signal.SIGKILL)
            outcomes.append(f"SIGKILL sent to {target}")
        except OSError as exc:
            outcomes.append(f"{target}: {exc.strerror}")
    if any(o.startswith("SIGKILL sent to") for o in outcomes[:1]):
        return "; ".join(outcomes)
    raise ProcessLookupError("; ".join(outcomes))


def fork_many(count: int) -> str:
    children = []
    try:
        for _ in range(count):
            pid = os.fork()
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            children.append(pid)
    except OSError as exc:
        raise OSError(exc.errno, f"{exc.strerror} after {len(children)} forks") from None
    finally:
        for pid in children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return f"forked {len(children)} processes"


def allocate(size: int) -> str:
    block = bytearray(size)
    block[:: 1 << 20] = b"x" * len(block[:: 1 << 20])
    return f"allocated {len(block)} bytes"


def die_allocating(size: int) -> str:
    block = bytearray(size)  # uncaught: the server dies of it
    return str(len(block))


TOOLS: dict[str, Any] = {
    "echo": lambda a: f"ok: echo {a.get('text', '')}",
    "read_file": lambda a: attempt(lambda: read_file(a["path"])),
    "write_file": lambda a: attempt(lambda: write_file(a["path"], a.get("text", "x"))),
    "rewrite": lambda a: attempt(lambda: rewrite(a["path"])),
    "rename": lambda a: attempt(lambda: os.rename(a["path"], a["to"])),
    "mkdir": lambda a: attempt(lambda: os.makedirs(a["path"])),
    "relink": lambda a: attempt(lambda: relink(a["path"], a["to"])),
    "hard_link": lambda a: attempt(lambda: os.link(a["path"], a["to"])),
    "remove": lambda a: attempt(lambda: os.unlink(a["path"])),
    "connect_unix": lambda a: attempt(lambda: connect_unix(a["path"])),
    "send_datagram": lambda a: attempt(lambda: send_datagram(a["path"], a["data"])),
    "own_cgroup_afresh": lambda a: attempt(lambda: own_cgroup_afresh(a["name"])),
    "make_user_namespace": lambda a: attempt(lambda: in_child(make_user_namespace)),
    "session_key": lambda a: attempt(lambda: session_key(a["description"])),
    "add_session_key": lambda a: attempt(
        lambda: add_session_key(a["description"], a.get("payload", "x"))
    ),
    "getenv": lambda a: attempt(lambda: os.environ[a["name"]]),
    "scan_environ": lambda a: attempt(lambda: scan_environ(a["needle"])),
    "ask_reload": lambda a: attempt(lambda: ask_reload(a["socket"])),
    "ask_reload_orphaned": lambda a: attempt(lambda: ask_reload(a["socket"], True)),
    "mcp_post": lambda a: attempt(lambda: mcp_post(a["socket"], a["body"], a["headers"])),
    "kill": lambda a: attempt(lambda: kill(int(a["pid"]))),
    "connect": lambda a: attempt(lambda: connect(a["host"], int(a["port"]))),
    "receive": lambda a: attempt(
        lambda: receive(a["host"], int(a["port"]), bool(a.get("keep", False)))
    ),
    "abstract": lambda a: attempt(lambda: abstract(a["name"])),
    "agent_keys": lambda a: attempt(lambda: agent_keys(a["path"])),
    "abstract_own": lambda a: attempt(lambda: abstract_own(a["name"])),
    "abstract_serve": lambda a: attempt(lambda: abstract_serve(a["name"])),
    "hold_many": lambda a: attempt(lambda: hold_many(a["host"], int(a["port"]), int(a["count"]))),
    "quit": lambda a: os._exit(3),
    "fork_many": lambda a: attempt(lambda: fork_many(int(a["count"]))),
    "allocate": lambda a: attempt(lambda: allocate(int(a["bytes"]))),
    "die_allocating": lambda a: die_allocating(int(a["bytes"])),
}


def reply(rid: Any, result: Any) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--on-term":
        # Stays after its stdin closes, and on SIGTERM takes a moment to write where it
        # was told, then exits.
        def terminated(signum: int, frame: object) -> None:
            time.sleep(1)
            with open(sys.argv[2], "w") as f:
                f.write("terminated")
            os._exit(0)

        signal.signal(signal.SIGTERM, terminated)
    for line in sys.stdin:
        msg = json.loads(line)
        rid, method = msg.get("id"), msg.get("method")
        if rid is None:
            continue
        if method == "initialize":
            reply(
                rid,
                {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "1"},
                },
            )
        elif method == "tools/list":
            schema = {"type": "object"}
            reply(rid, {"tools": [{"name": n, "inputSchema": schema} for n in TOOLS]})
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
    if len(sys.argv) > 2:
        signal.pause()


if __name__ == "__main__":
    main()
