"""Load generator: MCP ``tools/call`` with N requests in flight over one stdio pipe or Unix socket.

It does the handshake (modern ``server/discover`` by default, ``--legacy`` for
``initialize``), checks that the tool is listed, then runs each cell of the matrix in turn
on the same connection: a warm-up, then a measured window of ``--duration`` seconds (or
``--count`` calls), keeping ``concurrency`` requests in flight all the time.

The hot loop is a single-threaded selector over non-blocking fds; request lines are
pre-encoded up to the id, so sending a request is one concatenation. ``loadgen_cpu`` in the
output shows how busy the generator itself was: near 1.0 means it, not the target, set the pace.

It waits for replies by polling, up to ``SPIN`` before it sleeps. On a VM a CPU that
idles for longer than its halt-polling window (200 µs here) is given back to the host,
and waking it again costs several hundred µs: a sleeping generator measured whether a
round trip stayed under that window (one call took 200 µs, the next 650) more than how
long it took. The time spent polling is not counted in ``loadgen_cpu``.

    python -m bench.loadgen --spawn -- python bench/echo_server.py
    python -m bench.loadgen --connect /tmp/x/mcpd.sock --tool mcp__echo__echo --cpu-pid 1234
    python -m bench.loadgen --http http://127.0.0.1:8000/mcp --cpu-pid 1234
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import gc
import os
import selectors
import subprocess
import sys
import time
from typing import Any

import msgspec

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import procstat
from bench.echo_server import split_lines
from bench.wire import ENVELOPE, LineClient, encode


class CallOutcome(msgspec.Struct):
    isError: bool = False


class CallReply(msgspec.Struct):
    id: int | str | None = None
    method: str | None = None
    result: CallOutcome | None = None
    error: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)  # empty = absent


class Text(msgspec.Struct):
    text: str = ""


class FullResult(msgspec.Struct):
    content: list[Text]
    resultType: str | None = None


class FullReply(msgspec.Struct):
    result: FullResult


PIPE_SIZE = 1 << 20
READ_SIZE = 64 * 1024
# How long a wait for replies polls before it sleeps: longer than any round trip the
# matrix times at one call at a time, except the slowest proxy's.
SPIN = 2_000_000  # ns
REQUEST_PREFIX = b'{"jsonrpc":"2.0","id":'
# How replies from msgspec-, json- and pydantic-based servers start (compact JSON).
REPLY_PREFIX = b'{"jsonrpc":"2.0","id":'


def call_suffix(tool: str, payload: int, modern: bool) -> bytes:
    """Everything after the id in a tools/call request line."""
    params: dict[str, Any] = {"name": tool, "arguments": {"text": "x" * payload}}
    if modern:
        params["_meta"] = ENVELOPE
    return b',"method":"tools/call","params":' + encode(params) + b"}\n"


def percentile(sorted_values: list[int], q: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[k] / 1e3  # ns -> us


class Pump:
    """Keeps `concurrency` calls in flight and records each call's latency."""

    def __init__(self, client: LineClient, tool: str, modern: bool) -> None:
        self.rfd = client.rfd
        self.wfd = client.wfd
        self.pending = client.buffer  # bytes the handshake read past its last reply
        client.buffer = b""
        self.next_id = client.next_id + 1000
        self.tool = tool
        self.modern = modern
        self.decode = msgspec.json.Decoder(CallReply).decode
        # payload size -> "ok" or what was wrong with the first good reply of that size
        self.checked: dict[int, str] = {}
        os.set_blocking(self.rfd, False)
        os.set_blocking(self.wfd, False)

    def run(
        self, concurrency: int, payload: int, duration: float | None, count: int | None
    ) -> dict[str, Any]:
        prefix = REQUEST_PREFIX
        suffix = call_suffix(self.tool, payload, self.modern)
        sent_at: dict[int, int] = {}
        latencies: list[int] = []
        errors = 0
        first_error = ""
        polled = 0  # ns spent polling for replies (not the generator's own work)
        out = bytearray()
        extend = out.extend
        clock = time.perf_counter_ns
        deadline = clock() + int(duration * 1e9) if duration else None
        to_send = count if count else 1 << 62
        next_id = self.next_id

        sel = selectors.DefaultSelector()
        same_fd = self.rfd == self.wfd
        sel.register(self.rfd, selectors.EVENT_READ)
        writing = False

        def queue(n: int, now: int) -> None:
            nonlocal next_id, to_send
            n = min(n, to_send)
            to_send -= n
            for _ in range(n):
                sent_at[next_id] = now
                extend(prefix)
                extend(str(next_id).encode())
                extend(suffix)
                next_id += 1

        queue(concurrency, clock())
        check_this = payload not in self.checked
        buffer = self.pending
        self.pending = b""
        while sent_at:
            if out:
                try:
                    written = os.write(self.wfd, out)
                    del out[:written]
                except BlockingIOError:
                    pass
            want_write = bool(out)
            if want_write != writing:
                writing = want_write
                if same_fd:
                    mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if writing else 0)
                    sel.modify(self.rfd, mask)
                elif writing:
                    sel.register(self.wfd, selectors.EVENT_WRITE)
                else:
                    sel.unregister(self.wfd)
            readable = False
            if not buffer or b"\n" not in buffer:
                ready = sel.select(0)
                if not ready:
                    began = clock()
                    while not ready and clock() - began < SPIN:
                        ready = sel.select(0)
                    polled += clock() - began
                    if not ready:
                        ready = sel.select(30.0)
                for key, events in ready:
                    if key.fd == self.rfd and events & selectors.EVENT_READ:
                        readable = True
                if not readable:
                    if not want_write:
                        raise TimeoutError(f"{len(sent_at)} calls got no answer in 30 s")
                    continue
                try:
                    chunk = os.read(self.rfd, READ_SIZE)
                except BlockingIOError:
                    continue
                if not chunk:
                    raise ConnectionError("the target closed the connection")
                buffer += chunk
            lines, buffer = split_lines(buffer)
            now = clock()
            done = 0
            for line in lines:
                msg_id, ok = self._classify(line)
                if msg_id is None:
                    continue  # a notification
                start = sent_at.pop(msg_id, None)  # type: ignore[arg-type]
                if start is None:
                    errors += 1
                    first_error = first_error or line[:300].decode(errors="replace")
                    continue
                latencies.append(now - start)
                done += 1
                if not ok:
                    errors += 1
                    first_error = first_error or line[:300].decode(errors="replace")
                elif check_this:
                    self.checked[payload] = self._check(line, payload)
                    check_this = False
            if done and (deadline is None or now < deadline):
                queue(done, now)
        self.pending = buffer
        self.next_id = next_id
        sel.close()
        return {
            "latencies": latencies,
            "errors": errors,
            "first_error": first_error,
            "polled_s": polled / 1e9,
        }

    def _classify(self, line: bytes) -> tuple[int | str | None, bool]:
        """(id, success) of one reply; id None for a notification.

        Decoding a 16 KiB reply costs the generator as much as the echo server spends on
        it, so a large reply that starts the canonical way is read without a full decode:
        its id is the number after the prefix, and a failure would say "isError":true
        (an error response is never this large).
        """
        if len(line) > 2048 and line.startswith(REPLY_PREFIX):
            end = line.find(b",", len(REPLY_PREFIX), len(REPLY_PREFIX) + 24)
            if end > 0:
                id_text = line[len(REPLY_PREFIX) : end]
                if id_text.isdigit():
                    return int(id_text), b'"isError":true' not in line
        reply = self.decode(line)
        if reply.method is not None:
            return None, True
        ok = not reply.error and reply.result is not None and not reply.result.isError
        return reply.id, ok

    def _check(self, line: bytes, payload: int) -> str:
        """Does a reply really echo the text back? A cut or altered text is reported, since
        the figures of that cell then measure something else."""
        try:
            result = msgspec.json.decode(line, type=FullReply).result
        except msgspec.DecodeError as exc:
            return f"unexpected reply shape: {exc}"
        text = "".join(block.text for block in result.content)
        if text != "x" * payload:
            return f"echo mismatch: got {len(text)} chars back for {payload} sent"
        if self.modern and result.resultType not in (None, "complete"):
            return f"unexpected resultType {result.resultType!r}"
        return "ok"


def measure_cell(
    pump: Pump,
    cpu_pids: list[int],
    concurrency: int,
    payload: int,
    duration: float | None,
    count: int | None,
    warmup: float,
    upstream_pids: list[int] | None = None,
) -> dict[str, Any]:
    """One cell's figures. The CPU of ``upstream_pids`` (a server that is not the
    target's child) counts in the target's, and is given on its own as well."""
    upstream_pids = upstream_pids or []
    cpu_pids = [*cpu_pids, *upstream_pids]
    if warmup > 0:
        pump.run(concurrency, payload, warmup, None)
    gc.collect()
    upstream_cpu0 = procstat.cpu_seconds(upstream_pids) if upstream_pids else 0.0
    target_cpu0 = procstat.cpu_seconds(cpu_pids) if cpu_pids else 0.0
    own0 = os.times()
    t0 = time.perf_counter()
    outcome = pump.run(concurrency, payload, duration, count)
    wall = time.perf_counter() - t0
    own1 = os.times()
    target_cpu = procstat.cpu_seconds(cpu_pids) - target_cpu0 if cpu_pids else None
    upstream_cpu = procstat.cpu_seconds(upstream_pids) - upstream_cpu0 if upstream_pids else None
    lat = sorted(outcome["latencies"])
    calls = len(lat)
    cell: dict[str, Any] = {
        "concurrency": concurrency,
        "payload": payload,
        "calls": calls,
        "errors": outcome["errors"],
        "wall_s": wall,
        "calls_per_s": calls / wall if wall > 0 else 0.0,
        "p50_us": percentile(lat, 0.50),
        "p90_us": percentile(lat, 0.90),
        "p99_us": percentile(lat, 0.99),
        "mean_us": (sum(lat) / calls / 1e3) if calls else float("nan"),
        "loadgen_cpu": max(
            0.0,
            ((own1.user - own0.user) + (own1.system - own0.system) - outcome["polled_s"]) / wall,
        ),
    }
    if outcome["first_error"]:
        cell["first_error"] = outcome["first_error"]
    cell["check"] = pump.checked.get(payload, "no successful reply")
    if target_cpu is not None:
        cell["target_cpu_s"] = target_cpu
        cell["cpu_us_per_call"] = target_cpu / calls * 1e6 if calls else float("nan")
        if upstream_cpu is not None and calls:
            cell["upstream_cpu_us_per_call"] = upstream_cpu / calls * 1e6
        cell["target_memory"] = procstat.tree_memory_kb(cpu_pids)
        cell["target_main_memory"] = procstat.memory_kb(cpu_pids[0])
    return cell


def parse_matrix(text: str) -> list[tuple[int, int]]:
    """'1:64,32:16384' -> [(1, 64), (32, 16384)]  (concurrency:payload bytes)."""
    cells = []
    for item in text.split(","):
        conc, _, size = item.partition(":")
        cells.append((int(conc), int(size)))
    return cells


def cpu_list(text: str | None) -> set[int] | None:
    return {int(c) for c in text.split(",")} if text else None


def open_target(
    args: argparse.Namespace, stack: contextlib.ExitStack
) -> tuple[LineClient, list[int]]:
    """Connect to the socket or start the server; returns the client and the pids to watch."""
    if args.http or args.sse:
        from bench.httpload import HttpClient
        from bench.sseload import SseClient

        http = SseClient(args.sse) if args.sse else HttpClient(args.http)
        stack.callback(http.close)
        return http, list(args.cpu_pid)
    if not args.spawn:
        client = LineClient.connect(args.connect, timeout=args.timeout)
        stack.callback(client.close)
        return client, list(args.cpu_pid)
    spawn_cpus = cpu_list(args.spawn_cpus)
    err = None
    if args.stderr:
        err = os.open(args.stderr, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        stack.callback(os.close, err)
    proc = subprocess.Popen(
        args.command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=err,
        bufsize=0,
        preexec_fn=(lambda: os.sched_setaffinity(0, spawn_cpus)) if spawn_cpus else None,
    )
    stack.callback(stop_process, proc)
    assert proc.stdin is not None and proc.stdout is not None
    for fd in (proc.stdin.fileno(), proc.stdout.fileno()):
        # 32 x 16 KiB in flight would otherwise move through 64 KiB pipes in lock-step.
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    return LineClient(proc.stdout.fileno(), proc.stdin.fileno()), [proc.pid, *args.cpu_pid]


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Close stdin as the stdio transport says, then insist."""
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--connect", metavar="SOCKET", help="Unix socket to connect to")
    where.add_argument("--spawn", action="store_true", help="run the command after -- on stdio")
    where.add_argument("--http", metavar="URL", help="Streamable HTTP endpoint to POST to")
    where.add_argument("--sse", metavar="URL", help="HTTP+SSE (2024-11-05) event stream")
    parser.add_argument("command", nargs="*", help="with --spawn: the server command")
    parser.add_argument("--tool", default="echo")
    parser.add_argument("--legacy", action="store_true", help="initialize handshake, no _meta")
    parser.add_argument("--matrix", default="1:64,1:16384,32:64,32:16384")
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per cell")
    parser.add_argument("--count", type=int, help="calls per cell instead of --duration")
    parser.add_argument("--warmup", type=float, default=0.3, help="seconds before each cell")
    parser.add_argument("--cpu-pid", type=int, action="append", default=[], help="target pid")
    parser.add_argument(
        "--upstream-pid", type=int, action="append", default=[],
        help="the target's upstream server: counted in its CPU, and given apart",
    )  # fmt: skip
    parser.add_argument("--cpus", help="pin the load generator to these CPUs, e.g. 0")
    parser.add_argument("--spawn-cpus", help="pin the spawned server to these CPUs, e.g. 1")
    parser.add_argument("--stderr", help="with --spawn: file for the server's stderr")
    parser.add_argument("--timeout", type=float, default=60.0, help="handshake timeout")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    args = parser.parse_args(argv)

    if cpus := cpu_list(args.cpus):
        os.sched_setaffinity(0, cpus)
    if args.spawn and not args.command:
        parser.error("--spawn needs a command after --")
    report: dict[str, Any] = {"tool": args.tool, "era": "legacy" if args.legacy else "modern"}
    with contextlib.ExitStack() as stack:
        started = time.perf_counter()
        client, cpu_pids = open_target(args, stack)
        client.handshake(modern=not args.legacy)
        report["ready_ms"] = (time.perf_counter() - started) * 1e3
        tools = client.list_tools()
        report["tools_listed"] = len(tools)
        if args.tool not in tools:
            raise SystemExit(f"tool {args.tool!r} is not listed; the first few: {tools[:5]}")
        if args.sse:
            from bench.sseload import SseClient, SsePump

            assert isinstance(client, SseClient)
            pump: Pump = SsePump(client, args.tool, modern=not args.legacy)
        elif args.http:
            from bench.httpload import HttpClient, HttpPump

            assert isinstance(client, HttpClient)
            pump = HttpPump(client, args.tool, modern=not args.legacy)
        else:
            pump = Pump(client, args.tool, modern=not args.legacy)
        gc.disable()  # a collection in the middle of a window shows up as a latency spike
        report["cells"] = [
            measure_cell(
                pump, cpu_pids, c, p, args.duration, args.count, args.warmup, args.upstream_pid
            )
            for c, p in parse_matrix(args.matrix)
        ]

    if args.json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    else:
        print_report(report)
    return 0


def print_report(report: dict[str, Any]) -> None:
    print(f"ready after {report['ready_ms']:.0f} ms, {report['tools_listed']} tools listed")
    print(
        f"{'conc':>4} {'bytes':>6} {'calls/s':>9} {'p50 us':>8} {'p90 us':>8} {'p99 us':>8}"
        f" {'cpu us/call':>11} {'gen cpu':>7} {'errors':>6} {'upstream us/call':>16}"
    )
    for c in report["cells"]:
        cpu = f"{c['cpu_us_per_call']:.1f}" if "cpu_us_per_call" in c else "-"
        print(
            f"{c['concurrency']:>4} {c['payload']:>6} {c['calls_per_s']:>9.0f} {c['p50_us']:>8.0f}"
            f" {c['p90_us']:>8.0f} {c['p99_us']:>8.0f} {cpu:>11} {c['loadgen_cpu']:>7.2f}"
            f" {c['errors']:>6} {c.get('upstream_cpu_us_per_call', float('nan')):>16.1f}"
        )
        if c["check"] != "ok":
            print(f"     check: {c['check']}")
        if "first_error" in c:
            print(f"     first error: {c['first_error']}")


if __name__ == "__main__":
    sys.exit(main())
