"""A stdio MCP server that misbehaves on purpose.

It starts and lists its tools like any good server, so mcpd connects to it; the
misbehaviour comes with ``tools/call``, chosen by the tool's name (one per fault), or
with the process-wide flags below. Every call runs in its own thread, so a call that
never answers does not hold up the others. Plain stdlib, so it starts fast.

Tools: echo, bytewise, batched, invalid_json, not_jsonrpc, unknown_id, duplicate,
wrong_id_type, flood, huge_line, endless_line, never, late, close_stdout, exit, invalid_utf8,
nested_deep, stderr_flood, garbage_flood, blank_flood, stderr_blank_flood, slow (answers
after 0.1 s), big (a 256 KiB image), freeze (from then on the server answers nothing at
all, this call nor any request after it, though it keeps reading).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

MODERN = "2026-07-28"
TOOLS = (
    "echo",
    "bytewise",
    "batched",
    "invalid_json",
    "not_jsonrpc",
    "unknown_id",
    "duplicate",
    "wrong_id_type",
    "flood",
    "huge_line",
    "endless_line",
    "never",
    "late",
    "close_stdout",
    "exit",
    "invalid_utf8",
    "nested_deep",
    "stderr_flood",
    "garbage_flood",
    "blank_flood",
    "stderr_blank_flood",
    "slow",
    "big",
    "freeze",
)

p = argparse.ArgumentParser()
p.add_argument("--pid-dir", help="write this process's pid (and its helpers') here")
p.add_argument("--ignore-sigterm", action="store_true")
p.add_argument("--linger", action="store_true", help="keep running after stdin closes")
p.add_argument("--grandchild", action="store_true", help="start a helper that holds stdout")
p.add_argument("--banners", action="store_true", help="log lines on stdout between messages")
p.add_argument("--late", type=float, default=3.0, help="seconds before `late` answers")
p.add_argument("--flood-rate", type=int, default=100_000, help="notifications per second")
p.add_argument("--flood-seconds", type=float, default=1.5)
p.add_argument("--huge-mib", type=int, default=64)
p.add_argument("--batch", type=int, default=3, help="responses `batched` writes at once")
p.add_argument("--stderr-seconds", type=float, default=2.0)
args = p.parse_args()

_out_lock = threading.Lock()
_stdout_closed = threading.Event()
_frozen = threading.Event()
_batch: list[bytes] = []
_batch_lock = threading.Lock()


def _write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(1, view)
        view = view[n:]


def out(data: bytes) -> None:
    """Write bytes to stdout as they are, atomically with respect to other writers."""
    if _stdout_closed.is_set() or _frozen.is_set():
        return
    with _out_lock:
        try:
            if args.banners:
                _write_all(b"[hostile] INFO about to write a message\n")
            _write_all(data)
        except OSError:
            pass


def message(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def response(rid: Any, res: dict[str, Any]) -> bytes:
    res.setdefault("resultType", "complete")
    return message({"jsonrpc": "2.0", "id": rid, "result": res})


def text_result(rid: Any, text: str) -> bytes:
    return response(rid, {"content": [{"type": "text", "text": text}]})


def tool_defs() -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "description": f"misbehaves: {name}",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }
        for name in TOOLS
    ]


def flush_batch() -> None:
    with _batch_lock:
        pending = b"".join(_batch)
        _batch.clear()
    if pending:
        out(pending)  # several responses, one write


def call(rid: Any, name: str, text: str) -> None:
    answer = text_result(rid, f"{name}:{text}")
    if name == "echo":
        out(answer)
    elif name == "bytewise":
        with _out_lock:
            for i in range(len(answer)):
                os.write(1, answer[i : i + 1])
                time.sleep(0.002)
    elif name == "batched":
        with _batch_lock:
            _batch.append(answer)
            full = len(_batch) >= args.batch
            first = len(_batch) == 1
        if full:
            flush_batch()
        elif first:
            threading.Timer(0.3, flush_batch).start()
    elif name == "invalid_json":
        out(b'{"jsonrpc": "2.0", "id": ' + json.dumps(rid).encode() + b', "result": {\n')
        out(b"this is not json at all\n\x00\x01\x02\n{{{{\n")
        out(answer)
    elif name == "not_jsonrpc":
        out(b'{"hello": "world"}\n[1, 2, 3]\n"a string"\n42\nnull\n')
        out(message({"jsonrpc": "1.0", "id": rid, "result": {}}))
        out(message({"jsonrpc": "2.0", "id": rid}))
        out(message({"jsonrpc": "2.0", "id": rid, "result": {}, "method": 7}))
        out(answer)
    elif name == "unknown_id":
        out(text_result(10**9, "for nobody"))
        out(text_result(-5, "for nobody either"))
        out(text_result(2**70, "a number no request ever had"))
        out(answer)
    elif name == "duplicate":
        out(answer)
        out(text_result(rid, "a second answer to the same request"))
    elif name == "wrong_id_type":
        other = str(rid) if isinstance(rid, int) else 0
        out(text_result(other, "answered under the wrong type of id"))
    elif name == "flood":
        flood(rid, answer)
    elif name == "huge_line":
        huge_line(rid)
    elif name == "endless_line":
        endless_line()
    elif name == "never":
        return
    elif name == "freeze":
        _frozen.set()
    elif name == "late":
        time.sleep(args.late)
        out(answer)
    elif name == "close_stdout":
        _stdout_closed.set()
        with _out_lock:
            os.close(1)
        print("closed stdout, still running", file=sys.stderr, flush=True)
    elif name == "exit":
        print("exiting between request and response", file=sys.stderr, flush=True)
        os._exit(7)
    elif name == "invalid_utf8":
        raw = (
            b'{"jsonrpc":"2.0","id":' + json.dumps(rid).encode() + b',"result":{"content":'
            b'[{"type":"text","text":"ok"}],"_meta":{"note":"\xff\xfe bad \xc3"},'
            b'"resultType":"complete"}}\n'
        )
        out(raw)
    elif name == "nested_deep":
        deep = b'{"a":[' * 5000 + b"1" + b"]}" * 5000
        out(answer[:-3] + b',"structuredContent":' + deep + b"}}\n")
    elif name == "stderr_flood":
        threading.Thread(target=stderr_flood, daemon=True).start()
        out(answer)
    elif name == "slow":
        time.sleep(0.1)
        out(answer)
    elif name == "big":
        image = {"type": "image", "mimeType": "image/png", "data": "QUFB" * (64 * 1024)}
        out(response(rid, {"content": [image]}))
    elif name == "blank_flood":
        blank_flood(1)
    elif name == "stderr_blank_flood":
        blank_flood(2)
    elif name == "garbage_flood":
        garbage = b"DEBUG: something on stdout that is not JSON\n" * 1000
        end = time.monotonic() + args.flood_seconds
        while time.monotonic() < end:
            out(garbage)
        out(answer)


def flood(rid: Any, answer: bytes) -> None:
    """Notifications at ``--flood-rate`` per second for ``--flood-seconds``, then the answer."""
    batch = 1000
    lines = []
    for i in range(batch):
        note: dict[str, Any]
        if i == batch - 1:
            note = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        elif i % 2:
            note = {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": rid, "progress": i},
            }
        else:
            note = {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "debug", "data": f"flooding {i}"},
            }
        lines.append(message(note))
    chunk = b"".join(lines)
    interval = batch / args.flood_rate
    start = time.monotonic()
    sent = 0
    while time.monotonic() - start < args.flood_seconds:
        out(chunk)
        sent += 1
        delay = start + sent * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    out(answer)


def huge_line(rid: Any) -> None:
    """One line of ``--huge-mib`` MiB, written in pieces, never built whole."""
    head = b'{"jsonrpc":"2.0","id":' + json.dumps(rid).encode()
    head += b',"result":{"content":[{"type":"text","text":"'
    tail = b'"}],"resultType":"complete"}}\n'
    piece = b"x" * (1 << 20)
    with _out_lock:
        try:
            _write_all(head)
            for _ in range(args.huge_mib):
                _write_all(piece)
            _write_all(tail)
        except OSError:
            pass


def endless_line() -> None:
    """A line that never ends, written as fast as it is read, until stdout closes."""
    piece = b"x" * (64 * 1024)
    with _out_lock:
        try:
            _write_all(b"{")
            while True:
                _write_all(piece)
        except OSError:
            pass


def stderr_flood() -> None:
    line = b"hostile stderr: " + b"noise " * 10 + b"\n"
    chunk = line * 200
    end = time.monotonic() + args.stderr_seconds
    try:
        while time.monotonic() < end:
            _stderr_write(chunk)
    except OSError:
        pass


def blank_flood(fd: int) -> None:
    """Blank lines (empty, of spaces, ending in CRLF) on ``fd`` as fast as they are read,
    until it closes; never an answer."""
    chunk = b"\n \n\r\n \t \n" * 8192
    view = memoryview(chunk)
    try:
        while True:
            os.write(fd, view)
    except OSError:
        pass


def _stderr_write(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(2, view) :]


def handle(msg: dict[str, Any]) -> None:
    method = msg.get("method")
    rid = msg.get("id")
    params = msg.get("params")
    if not isinstance(params, dict):
        params = {}
    if rid is None:
        return
    if method == "server/discover":
        out(
            response(
                rid,
                {
                    "supportedVersions": [MODERN],
                    "capabilities": {"tools": {"listChanged": True}},
                    "ttlMs": 0,
                    "cacheScope": "private",
                },
            )
        )
    elif method == "tools/list":
        out(response(rid, {"tools": tool_defs()}))
    elif method == "ping":
        out(response(rid, {}))
    elif method == "tools/call":
        name = str(params.get("name"))
        arguments = params.get("arguments")
        text = str(arguments.get("text", "")) if isinstance(arguments, dict) else ""
        threading.Thread(target=call, args=(rid, name, text), daemon=True).start()
    else:
        out(message({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": method}}))


def record_pid(pid: int) -> None:
    """Its pid as it sees it and its PID namespace (in a sandbox, its pids are the
    sandbox's own: ``tests.support.system.procs.pid_record``), in a file of its own."""
    if args.pid_dir:
        namespace = os.readlink("/proc/self/ns/pid")
        name = f"{pid}-{namespace.strip('pid:[]')}"
        with open(os.path.join(args.pid_dir, name + ".tmp"), "w") as f:
            f.write(f"{pid} {namespace}")
        os.rename(os.path.join(args.pid_dir, name + ".tmp"), os.path.join(args.pid_dir, name))


def main() -> None:
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    record_pid(os.getpid())
    if args.grandchild:
        helper = subprocess.Popen(["sleep", "600"], stdout=1, stderr=subprocess.DEVNULL)
        record_pid(helper.pid)
    if args.banners:
        out(b"hostile server 1.0 starting up\n=====================\n")
    print("hostile server ready", file=sys.stderr, flush=True)
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict):
            handle(msg)
    if args.linger:
        print("stdin closed, lingering", file=sys.stderr, flush=True)
        while True:
            time.sleep(60)


main()
