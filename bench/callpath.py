"""mcpd's own Python per tools/call, counted in-process: a figure that does not move
with the machine's load, as the timed cells of the matrix do.

A daemon runs in this process with the bench echo server as its stdio server, and an
agent in the same event loop sends calls over the daemon's socket, one at a time or
N at once. While a fixed number of calls go through, a profile hook counts the Python
functions of mcpd's packages (``mcpd``, ``protocol``, ``transports``) that run, and a
trace hook counts their bytecode instructions; C calls (msgspec's decodes, system
calls) are counted by name. Per call, also by function with ``--by-function``. What
mcpd hands to worker threads for these calls (the audit log's writing: each record's
line and journal entry) is counted with the rest, its records written before the
count ends.

    python -m bench.callpath                    # 64 B and 16 KiB, 1 and 32 at once
    python -m bench.callpath --cells 32:64 --by-function
    python -m bench.callpath --legacy-server    # mcpd talks to the server's legacy era
    python -m bench.callpath --http-server      # the server over Streamable HTTP
    python -m bench.callpath --no-audit         # without the audit log (audit = false)
    python -m bench.callpath --http-server --sse  # ... answering with event streams
    python -m bench.callpath --http-relay       # bench/http_relay.py in mcpd's place
    python -m bench.callpath --splicer          # bench/splicer.py in mcpd's place (stdio)

The counts include what a call costs in the reader and writer loops, shared among the
calls that came together. trio's own functions are counted apart (``trio``), and they
include the agent's: it runs in the same loop.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import json
import logging
import os
import subprocess
import sys
import tempfile
import unittest.mock
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, TextIO, TypeVar

import trio

from bench import http_relay
from bench import splicer as bench_splicer
from bench.targets import wait_for
from mcpd.config.loading.load import parse_config
from mcpd.daemon import Daemon
from mcpd.local.service.logsetup import setup_logging

ROOT = Path(__file__).resolve().parent.parent
ECHO = ROOT / "bench" / "echo_server.py"
BENCH_SECRET = "bench-secret-never-echoed-0123456789"
OURS = tuple(str(ROOT / package) + "/" for package in ("mcpd", "protocol", "transports"))
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
Tracer = Callable[[FrameType, str, Any], Any]
R = TypeVar("R")


class Counts:
    def __init__(self, ours: tuple[str, ...] = OURS) -> None:
        self.ours = ours
        self.functions: collections.Counter[str] = collections.Counter()
        self.bytecodes: collections.Counter[str] = collections.Counter()
        self.c_calls: collections.Counter[str] = collections.Counter()
        self.trio = 0
        # h11's functions and bytecodes: an HTTP exchange's parsing and framing.
        self.h11 = 0
        self.h11_bytecodes = 0

    @staticmethod
    def _name(frame: FrameType) -> str:
        code = frame.f_code
        return f"{code.co_filename[len(str(ROOT)) + 1 :]}:{code.co_name}"

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            if frame.f_code.co_filename.startswith(self.ours):
                self.functions[self._name(frame)] += 1
            elif "/trio/" in frame.f_code.co_filename:
                self.trio += 1
            elif "/h11/" in frame.f_code.co_filename:
                self.h11 += 1
        elif event == "c_call":
            self.c_calls[getattr(arg, "__qualname__", repr(arg))] += 1

    def trace(self, frame: FrameType, event: str, arg: Any) -> Tracer | None:
        if not frame.f_code.co_filename.startswith(self.ours):
            if "/h11/" not in frame.f_code.co_filename:
                return None
            frame.f_trace_opcodes = True
            return self._h11_opcode
        frame.f_trace_opcodes = True
        name = self._name(frame)

        def opcode(frame: FrameType, event: str, arg: Any) -> Tracer:
            if event == "opcode":
                self.bytecodes[name] += 1
            return opcode

        return opcode

    def _h11_opcode(self, frame: FrameType, event: str, arg: Any) -> Tracer:
        if event == "opcode":
            self.h11_bytecodes += 1
        return self._h11_opcode

    def add(self, other: Counts) -> None:
        self.functions += other.functions
        self.bytecodes += other.bytecodes
        self.c_calls += other.c_calls
        self.trio += other.trio
        self.h11 += other.h11
        self.h11_bytecodes += other.h11_bytecodes


@contextlib.contextmanager
def in_threads(hooks: Callable[[], None]) -> Iterator[None]:
    """Every function handed to ``trio.to_thread.run_sync`` meanwhile runs with
    ``hooks()`` installed in its thread (the hooks of ``sys`` are a thread's own)."""
    original = trio.to_thread.run_sync

    async def run_sync(fn: Callable[..., R], *args: Any, **options: Any) -> R:
        def hooked(*args: Any) -> R:
            hooks()
            try:
                return fn(*args)
            finally:
                sys.setprofile(None)
                sys.settrace(None)

        return await original(hooked, *args, **options)

    with unittest.mock.patch.object(trio.to_thread, "run_sync", run_sync):
        yield


def request(i: int, payload: int, modern: bool, tool: str = "mcp__echo__echo") -> bytes:
    params: dict[str, Any] = {"name": tool, "arguments": {"text": "x" * payload}}
    if modern:
        params["_meta"] = META
    message = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


async def count(
    cells: list[tuple[int, int]],
    calls: int,
    legacy_server: bool,
    legacy_agent: bool,
    workdir: str,
    url: str | None,
    audit: bool = True,
    relay: bool = False,
    splicer: bool = False,
) -> list[tuple[int, int, Counts]]:
    """Counts per cell for mcpd, or for ``bench/http_relay.py`` (``relay``) or
    ``bench/splicer.py`` (``splicer``) in its place."""
    server: dict[str, Any] = {"max_concurrency": max(c for c, _ in cells)}
    # A secret mcpd holds for the server, as real configs have: every result is
    # searched for it (the echo server never repeats it).
    if url is not None:
        server["url"] = url
        server["headers"] = {"X-Api-Key": BENCH_SECRET}
    else:
        server.update(command=sys.executable, args=[str(ECHO)], env={"API_TOKEN": BENCH_SECRET})
    if legacy_server:
        server["era"] = "legacy"
    config = parse_config(
        {
            "daemon": {
                "socket": f"{workdir}/mcpd.sock",
                "state_dir": f"{workdir}/state",
                "health_interval": 0,
                "result_budget_chars": 1 << 20,
                "audit": audit,
                "audit_journal": audit,
            },
            "servers": {"echo": server},
        }
    )
    daemon = Daemon(config)
    out = []
    tool, ours = "mcp__echo__echo", OURS
    async with trio.open_nursery() as nursery:
        if relay:
            assert url is not None
            tool, ours = "echo", (str(ROOT / "bench" / "http_relay.py"),)
            await nursery.start(http_relay.serve, f"{workdir}/mcpd.sock", url, 64)
        elif splicer:
            tool = "echo"
            ours = tuple(str(ROOT / "bench" / name) for name in ("splicer.py", "relay.py"))
            echo = [sys.executable, str(ECHO)]
            await nursery.start(
                bench_splicer.serve, f"{workdir}/mcpd.sock", echo, {"echo": "echo"}, 0
            )
        else:
            await nursery.start(daemon.run)
        sock = await trio.open_unix_socket(f"{workdir}/mcpd.sock")
        rest = b""

        async def replies(n: int) -> None:
            nonlocal rest
            while n > 0:
                data = await sock.receive_some(1 << 20)
                if not data:
                    raise RuntimeError("the daemon closed the connection")
                rest += data
                n -= rest.count(b"\n")
                rest = rest[rest.rfind(b"\n") + 1 :]

        if legacy_agent:
            hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
            init = {"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": hello}
            await sock.send_all(json.dumps(init).encode() + b"\n")
            await replies(1)
            await sock.send_all(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

        async def run(batch: bytes, concurrency: int, n: int) -> None:
            for _ in range(n // concurrency):
                await sock.send_all(batch)
                await replies(concurrency)

        for concurrency, payload in cells:
            batch = b"".join(
                request(i, payload, not legacy_agent, tool) for i in range(concurrency)
            )
            # Warm: the first calls set up what later ones reuse.
            await run(batch, concurrency, 4 * concurrency)
            await daemon.audit.flush()
            counts, threads = Counts(ours), Counts(ours)
            with in_threads(functools.partial(sys.setprofile, threads.profile)):
                sys.setprofile(counts.profile)
                try:
                    await run(batch, concurrency, calls)
                    await daemon.audit.flush()  # these calls' records, written
                finally:
                    sys.setprofile(None)
            with in_threads(functools.partial(sys.settrace, threads.trace)):
                sys.settrace(counts.trace)
                try:
                    await run(batch, concurrency, calls)
                    await daemon.audit.flush()
                finally:
                    sys.settrace(None)
            counts.add(threads)
            out.append((concurrency, payload, counts))
        await sock.aclose()
        daemon.stop()
        nursery.cancel_scope.cancel()
    return out


@contextlib.contextmanager
def logged(stream: TextIO) -> Iterator[None]:
    handler = setup_logging("stderr", "info", stream=stream)
    try:
        yield
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()


@contextlib.contextmanager
def http_echo(workdir: Path, sse: bool = False) -> Iterator[str]:
    """The echo server on Streamable HTTP (its URL), in a process of its own."""
    ready = workdir / "echo.url"
    command = [sys.executable, str(ECHO), "--http", "0", "--ready-file", str(ready)]
    command += ["--sse"] if sse else []
    with subprocess.Popen(command, stdin=subprocess.DEVNULL) as proc:
        try:
            wait_for(ready.exists, proc, 20)
            yield ready.read_text().strip()
        finally:
            proc.kill()


HEAD = (
    f"{'conc':>4} {'bytes':>6} {'functions':>9} {'bytecodes':>9} {'C calls':>7} {'trio':>5}"
    f" {'h11 fn':>6} {'h11 ops':>7}"
)


# The paths the bench runner counts: mcpd over stdio and the splicer in its place (the
# routing floor), mcpd over HTTP with JSON and with event-stream replies, and the HTTP
# relay in its place (the HTTP floor).
PATHS = {
    "stdio": [],
    # 32 calls of 16 KiB sent at once outgrow the pipes of a splicer that has no
    # queue of its own while the agent is still sending them: its 64 B cells only.
    "splice": ["--splicer", "--cells", "1:64,32:64"],
    "http": ["--http-server"],
    "http-sse": ["--http-server", "--sse"],
    "http-relay": ["--http-relay"],
}


def run(
    python: str, paths: dict[str, list[str]] | None = None
) -> list[dict[str, Any]] | dict[str, str]:
    """The counts from a process of their own (``python -m bench.callpath --json``) for
    each of ``paths`` (``PATHS``), for the bench runner, which does not load the daemon."""
    rows: list[dict[str, Any]] = []
    for path, flags in (PATHS if paths is None else paths).items():
        done = subprocess.run(
            [python, "-m", "bench.callpath", "--json", *flags],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            return {"skipped": f"{path}: " + (done.stderr.strip().splitlines() or ["failed"])[-1]}
        rows += [{**row, "path": path} for row in json.loads(done.stdout)]
    return rows


def lines(rows: list[dict[str, Any]]) -> list[str]:
    """The table of per-call figures (``rows`` as ``--json`` prints them, with the
    path each was counted on when the runner counted several)."""
    out = [f"{'':<10} " + HEAD]
    for r in rows:
        out.append(
            f"{r.get('path', ''):<10} {r['concurrency']:>4} {r['payload']:>6}"
            f" {r['functions']:>9.1f} {r['bytecodes']:>9.0f} {r['c_calls']:>7.1f}"
            f" {r['trio']:>5.1f} {r.get('h11', 0):>6.1f} {r.get('h11_bytecodes', 0):>7.0f}"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="mcpd's own Python per tools/call")
    parser.add_argument("--cells", default="1:64,32:64,1:16384,32:16384", help="conc:bytes,...")
    parser.add_argument("--calls", type=int, default=320, help="calls counted per cell")
    parser.add_argument("--by-function", action="store_true", help="per function, too")
    parser.add_argument("--legacy-server", action="store_true", help="the server's legacy era")
    parser.add_argument("--legacy-agent", action="store_true", help="the agent initializes")
    parser.add_argument("--http-server", action="store_true", help="over Streamable HTTP")
    parser.add_argument("--no-audit", action="store_true", help="audit = false, no journal")
    parser.add_argument("--sse", action="store_true", help="HTTP replies as event streams")
    parser.add_argument(
        "--splicer", action="store_true", help="count bench/splicer.py instead of mcpd (stdio)"
    )
    parser.add_argument(
        "--http-relay", action="store_true",
        help="count bench/http_relay.py instead of mcpd (over Streamable HTTP)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="one JSON list on stdout")
    args = parser.parse_args(argv)
    cells = [(int(c), int(p)) for c, p in (cell.split(":") for cell in args.cells.split(","))]
    workdir = tempfile.mkdtemp(prefix="mcpd-callpath-")
    with contextlib.ExitStack() as stack:
        # Logged as ``mcpd serve`` logs by default (a line for each call at info), to
        # nowhere: the lines are made and written, as a daemon's would be.
        stack.enter_context(logged(stack.enter_context(open(os.devnull, "w"))))
        http = args.http_server or args.http_relay
        url = stack.enter_context(http_echo(Path(workdir), args.sse)) if http else None
        results = trio.run(
            count,
            cells,
            args.calls,
            args.legacy_server,
            args.legacy_agent,
            workdir,
            url,
            not args.no_audit,
            args.http_relay,
            args.splicer,
        )
    n = args.calls
    rows = [
        {
            "concurrency": concurrency,
            "payload": payload,
            "functions": sum(c.functions.values()) / n,
            "bytecodes": sum(c.bytecodes.values()) / n,
            "c_calls": sum(c.c_calls.values()) / n,
            "trio": c.trio / n,
            "h11": c.h11 / n,
            "h11_bytecodes": c.h11_bytecodes / n,
        }
        for concurrency, payload, c in results
    ]
    if args.json:
        print(json.dumps(rows))
        return 0
    table = lines(rows)
    print(table[0])
    for line, (_, _, c) in zip(table[1:], results, strict=True):
        print(line)
        if args.by_function:
            for name, ops in c.bytecodes.most_common():
                print(f"    {ops / n:7.1f} bytecodes {c.functions[name] / n:5.2f} calls  {name}")
            for name, calls in c.c_calls.most_common(12):
                print(f"    {calls / n:7.2f} C calls  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
