"""Run the mcpd benchmarks and judge the targets.

    .venv/bin/python -m bench.run            # full run: 5 rounds, about 4.5 minutes on 2 cores
    .venv/bin/python -m bench.run --quick    # smoke run: 1 short round, about 2 minutes
    .venv/bin/python bench/run.py --help

Configurations (each drives the same echo server; see bench/README.md):
  direct              load generator <-> echo server over a stdio pipe
  relay               load generator -> bench.relay (byte copy) -> echo server (stdio)
  splice[-gate4]      load generator -> bench.splicer (routing only) -> echo server (stdio)
  mcpd[-gate64]       load generator -> mcpd's socket -> echo server (stdio upstream)
  mcpd-noaudit        the same as mcpd, without the audit log (audit = false)
  fastmcp-proxy       load generator <-> FastMCP's proxy (stdio) -> echo server (stdio)
  direct-http[-sse]   load generator -> echo server over Streamable HTTP (JSON / SSE replies)
  http-relay          load generator -> bench.http_relay (trio + h11) -> echo server (HTTP)
  mcpd-http[-sse]     load generator -> mcpd's socket -> echo server (HTTP, JSON / SSE)
  fastmcp-proxy-http  load generator <-> FastMCP's proxy (stdio) -> echo server (HTTP)
  mcp-proxy           load generator <-> mcp-proxy (stdio) -> echo server (HTTP)
  mcp-hub             load generator -> mcp-hub (HTTP+SSE) -> echo server (HTTP)

The configurations are interleaved (A B C, C B A, A B C, ...) over the rounds, and each cell is
reported as the median over the rounds. Then: the scale run (start-up against its floor,
in interleaved rounds; 10,000 tools; idle agents), the daemon's memory at several points,
the shared-instance comparison (N host sessions with their own servers, or through one
mcpd), the tool-search relevance check (precision@3 over real servers' tools), the
request latency of the socket's line protocol against POST /mcp on the socket and on the
TCP endpoint, the status page (its time and size with 10,000 tools, and the call
path with live pages open), and what putting tool lists through the gate costs
in-process (bench/pins.py). Raw results go to bench/results/ as JSON.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import audit, callpath, discovery, http_targets, page, peers, pins, report, targets
from bench.memory import MemorySettings, memory_lines, run_memory
from bench.scale import ScaleSettings, run_scale
from bench.shared import run_shared, shared_lines
from bench.targets import ROOT, Env, Launch, TargetUnavailable

# Interleaved in this order: the stdio rows, then the HTTP rows, each with its peers.
ORDER = (
    "direct", "relay", "splice", "splice-gate4", "mcpd", "mcpd-noaudit", "mcpd-gate64",
    "fastmcp-proxy",
    "direct-http", "direct-http-sse", "http-relay", "mcpd-http", "mcpd-http-sse",
    "fastmcp-proxy-http", "mcp-proxy", "mcp-hub",
)  # fmt: skip
_ALL = {**targets.CONFIGURATIONS, **http_targets.CONFIGURATIONS, **peers.CONFIGURATIONS}
CONFIGURATIONS = {name: _ALL[name] for name in ORDER}

RESULTS = ROOT / "bench" / "results"
MATRIX = "1:64,1:16384,32:64,32:16384"


class LoadgenFailed(Exception):
    pass


def run_loadgen(
    launch: Launch,
    matrix: str,
    duration: float,
    warmup: float,
    gen_cpus: set[int] | None,
    legacy: bool = False,
) -> dict[str, Any]:
    cells = len(matrix.split(","))
    cmd = [
        sys.executable, "-m", "bench.loadgen", "--json",
        "--matrix", matrix, "--duration", str(duration), "--warmup", str(warmup),
        "--tool", launch.tool,
    ]  # fmt: skip
    if gen_cpus:
        cmd += ["--cpus", ",".join(map(str, sorted(gen_cpus)))]
    if legacy:
        cmd.append("--legacy")
    cmd += launch.loadgen_args
    # Generous: a slow target (FastMCP takes seconds to start) must not be cut short.
    timeout = 120 + cells * (duration + warmup) * 4
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LoadgenFailed(f"load generator timed out after {timeout:.0f} s") from None
    if done.returncode != 0:
        tail = "\n".join("    " + x for x in done.stderr.strip().splitlines()[-8:])
        raise LoadgenFailed(f"load generator failed ({done.returncode}):\n{tail}")
    # Its last line is the report, one JSON object (bench.loadgen --json).
    return cast(dict[str, Any], json.loads(done.stdout.strip().splitlines()[-1]))


def split_cpus(pin: bool) -> tuple[set[int] | None, set[int] | None]:
    """One CPU for the load generator, the others for the target, when there are two."""
    cpus = sorted(os.sched_getaffinity(0))
    if not pin or len(cpus) < 2:
        return None, None
    return {cpus[0]}, set(cpus[1:])


def parse_options(items: list[str]) -> dict[str, Any]:
    """KEY=VALUE with VALUE read as JSON when it parses (numbers, true), else a string."""
    out: dict[str, Any] = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="bench.run",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 2)[2],
    )
    p.add_argument("--quick", action="store_true", help="1 round of short cells (smoke run)")
    p.add_argument("--rounds", type=int, help="rounds (default 5, --quick 1)")
    p.add_argument("--duration", type=float, help="seconds per cell (default 1.5, --quick 0.5)")
    p.add_argument("--warmup", type=float, help="warm-up seconds per cell (default 0.3)")
    p.add_argument("--configs", default=",".join(CONFIGURATIONS), help="comma-separated")
    p.add_argument("--matrix", default=MATRIX, help="concurrency:payload cells")
    p.add_argument("--legacy", action="store_true", help="agents use the initialize handshake")
    p.add_argument("--no-scale", action="store_true", help="skip the 10,000-tool scale run")
    p.add_argument("--no-memory", action="store_true", help="skip the memory points")
    p.add_argument("--no-shared", action="store_true", help="skip the shared-instance run")
    p.add_argument("--no-relevance", action="store_true", help="skip the tool-search check")
    p.add_argument("--no-endpoint", action="store_true", help="skip the latency by path")
    p.add_argument("--no-callpath", action="store_true", help="skip the in-process call count")
    p.add_argument("--no-page", action="store_true", help="skip the status page run")
    p.add_argument("--no-pins", action="store_true", help="skip the in-process list gate costs")
    p.add_argument("--no-pin", action="store_true", help="do not pin to separate CPUs")
    p.add_argument("--mcpd", help="command that runs mcpd's CLI (default: the venv's mcpd)")
    p.add_argument(
        "--daemon-option", action="append", default=[], metavar="KEY=VALUE",
        help="extra [daemon] key for the mcpd configs (dropped if mcpd rejects it)",
    )  # fmt: skip
    p.add_argument(
        "--server-option", action="append", default=[], metavar="KEY=VALUE",
        help="extra key for every [servers.X] table, e.g. max_concurrency=32",
    )  # fmt: skip
    p.add_argument("--scale-servers", type=int, default=50)
    p.add_argument("--scale-tools", type=int, default=200)
    p.add_argument("--idle-connections", type=int, default=1000)
    p.add_argument(
        "--startup-rounds", type=int, help="scale start-up rounds, mcpd vs floor (default 5)"
    )
    p.add_argument(
        "--shared-sessions", help="host sessions for the shared-instance run (default 1,4,8)"
    )
    p.add_argument("--output", type=Path, help="JSON results file (default bench/results/...)")
    args = p.parse_args(argv)
    args.rounds = args.rounds or (1 if args.quick else 5)
    args.duration = args.duration or (0.5 if args.quick else 1.5)
    args.warmup = args.warmup if args.warmup is not None else (0.1 if args.quick else 0.3)
    args.startup_rounds = args.startup_rounds or (1 if args.quick else 5)
    sessions = args.shared_sessions or ("1,4" if args.quick else "1,4,8")
    args.shared_sessions = [int(n) for n in sessions.split(",") if n.strip()]
    args.configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = set(args.configs) - set(CONFIGURATIONS)
    if unknown:
        p.error(f"unknown configurations: {', '.join(sorted(unknown))}")
    return args


def machine_info() -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "cpus": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "commit": commit,
        "load_average": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    logdir = RESULTS / f"logs-{stamp}"
    logdir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="mcpd-bench-"))
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # for the idle connections
    gen_cpus, target_cpus = split_cpus(not args.no_pin)
    info = machine_info()

    print(f"mcpd benchmarks ({'quick' if args.quick else 'full'} run), logs in {logdir}")
    print(
        f"  {info['cpus']} CPUs, load generator on {sorted(gen_cpus or [])}, targets on"
        f" {sorted(target_cpus or [])}; {args.rounds} round(s) x {args.duration} s per cell"
    )
    mcpd_cmd, mcpd_note = targets.find_mcpd(args.mcpd)
    print(f"  {mcpd_note}")
    found_peers, peer_notes = peers.ensure(args.configs, logdir)
    for note in peer_notes:
        print(f"  {note}")
    # A 16 KiB echo must come back whole; mcpd's default result text budget is smaller.
    daemon_options = {"result_budget_chars": 1 << 20, **parse_options(args.daemon_option)}
    env = Env(
        workdir=workdir,
        logdir=logdir,
        target_cpus=target_cpus,
        mcpd=mcpd_cmd,
        peers=found_peers,
        daemon_options=daemon_options,
        server_options=parse_options(args.server_option),
    )

    raw: dict[str, list[dict[str, Any]]] = {name: [] for name in args.configs}
    skipped: dict[str, str] = {}
    failures: dict[str, list[str]] = {name: [] for name in args.configs}
    started = time.monotonic()
    try:
        for r in range(args.rounds):
            print(f"\nround {r + 1}/{args.rounds}")
            # Every other round the other way round: no configuration always runs just
            # after the same one (whose files and cache it would inherit).
            for name in args.configs if r % 2 == 0 else args.configs[::-1]:
                if name in skipped:
                    continue
                try:
                    with CONFIGURATIONS[name](env) as launch:
                        result = run_loadgen(
                            launch, args.matrix, args.duration, args.warmup, gen_cpus, args.legacy
                        )
                except TargetUnavailable as exc:
                    if raw[name]:  # it ran before: a failure of this round, not a skip
                        failures[name].append(str(exc))
                        print(f"  {name:<18} FAILED: {exc}")
                    else:
                        skipped[name] = str(exc)
                        print(f"  {name:<18} SKIPPED: {exc}")
                    continue
                except LoadgenFailed as exc:
                    failures[name].append(str(exc))
                    print(f"  {name:<18} FAILED: {exc}")
                    continue
                raw[name].append(result)
                print(f"  {name:<18} " + progress_line(result))

        scale = None
        if not args.no_scale:
            scale = scale_run(env, args, gen_cpus)
        memory = None
        if not args.no_memory:
            memory = memory_run(env, args, scale)
        shared = None
        if not args.no_shared:
            shared = shared_run(env, args)
        relevance = None if args.no_relevance else discovery.relevance_run(mcpd_cmd, args.quick)
        endpoint = None if args.no_endpoint else discovery.endpoint_run(mcpd_cmd, args.quick)
        page_result = None if args.no_page else page.page_run(mcpd_cmd, args.quick)
        calls = None if args.no_callpath else callpath.run(sys.executable)
        gate = None if args.no_pins else pins.run(sys.executable)
        unaudited = (
            None
            if args.no_callpath
            else callpath.run(sys.executable, {"stdio, no audit": ["--no-audit"]})
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    summary: dict[str, Any] = {}
    for name in args.configs:
        if raw[name]:
            summary[name] = {
                "cells": report.median_cells(raw[name]),
                "memory": report.median_memory(raw[name]),
            }
        else:
            summary[name] = {"skipped": skipped.get(name) or "; ".join(failures[name]) or "?"}
    report.print_table(summary)
    verdicts = report.round_two_verdicts(summary, scale, memory)
    verdicts.append(discovery.relevance_verdict(relevance))
    verdicts += page.verdicts(page_result)
    print("\ntargets (performance, round two)")
    print(report.TABLE_HEAD)
    for verdict in verdicts:
        print(verdict.line())
    third = report.round_three_verdicts(summary)
    print("\ntargets (performance, round three: HTTP upstreams, the raised gate, the peers)")
    print(report.TABLE_HEAD)
    for verdict in third:
        print(verdict.line())
    verdicts += third
    if any(name in summary for name in report.PEERS):
        print("\nthe peers beside mcpd on the same upstream (x: how many times mcpd's is better)")
        for line in report.peer_lines(summary):
            print(line)
    floors = {
        "splice": "the routing floor (bench/splicer.py), judged the same way",
        "splice-gate4": "the routing floor with mcpd's default gate (4 calls at the server)",
    }
    for name, title in floors.items():
        if "cells" in summary.get(name, {}):
            # The same figures for a process that does nothing but route: what is left
            # between it and mcpd is the rest of mcpd's job.
            print(f"\n{title}")
            for verdict in report.call_path_verdicts(summary, name):
                print(verdict.line())
    if "cells" in summary.get(audit.OFF, {}):
        print("\nthe audit log's cost: mcpd (audit on, the default) / mcpd-noaudit")
        for verdict in audit.verdicts(summary):
            print(verdict.line())
    if scale and "skipped" not in scale:
        print("\nscale run")
        for line in report.scale_lines(scale):
            print(line)
    if memory:
        print("\nmemory that scales")
        for line in memory_lines(memory):
            print(line)
    if shared:
        print("\nshared instances: N host sessions x M stdio servers")
        for line in shared_lines(shared):
            print(line)
    if relevance and "skipped" not in relevance:
        print()
        for line in discovery.relevance_lines(relevance):
            print(line)
    if endpoint and "skipped" not in endpoint:
        print("\nrequest latency by path (1 agent, 1 request at a time, 64 B echo)")
        for line in discovery.endpoint_lines(endpoint):
            print(line)
    if page_result and "skipped" not in page_result:
        print("\nthe status page (one browser with a session; curl on the socket)")
        for line in page.render(page_result):
            print(line)
    if isinstance(calls, list):
        print("\nmcpd's own Python per tools/call, counted in-process (bench/callpath.py)")
        for line in callpath.lines(calls):
            print(f"  {line}")
    if gate is not None:
        print("\nputting 10,000 tools through the gate: cleaning, rules, pins (bench/pins.py)")
        for line in pins.lines(gate):
            print(line)
    if isinstance(unaudited, list):
        print("\nthe same without the audit log (bench/callpath.py --no-audit)")
        for line in callpath.lines(unaudited):
            print(f"  {line}")
        if isinstance(calls, list):
            print("\nthe audit log's cost, counted: stdio rows above / rows without it")
            for verdict in audit.counted_verdicts(calls, unaudited):
                print(verdict.line())
    if env.notes:
        print("\nnotes")
        for note in dict.fromkeys(env.notes):
            print(f"  {note}")

    output = args.output or RESULTS / f"run-{stamp}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "when": stamp,
        "machine": info,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "cpus": {"loadgen": sorted(gen_cpus or []), "target": sorted(target_cpus or [])},
        "mcpd": mcpd_note,
        "peers": peer_notes,
        "notes": list(dict.fromkeys(env.notes)),
        "raw": raw,
        "failures": failures,
        "summary": {
            name: {
                **data,
                "cells": {f"{c}:{p}": v for (c, p), v in data.get("cells", {}).items()},
            }
            for name, data in summary.items()
        },
        "scale": scale,
        "memory": memory,
        "shared": shared,
        "relevance": relevance,
        "endpoint": endpoint,
        "page": page_result,
        "callpath": calls,
        "pins": gate,
        "callpath_unaudited": unaudited,
        "targets": [v.__dict__ for v in verdicts],
        "elapsed_s": time.monotonic() - started,
    }
    output.write_text(json.dumps(document, indent=1, default=str) + "\n")
    print(f"\nraw results: {output}  ({time.monotonic() - started:.0f} s)")
    return 0


def progress_line(result: dict[str, Any]) -> str:
    parts = []
    for c in result["cells"]:
        bad = f" {c['errors']}err" if c["errors"] else ""
        bad += " !check" if c["check"] != "ok" else ""
        cell = f"{c['concurrency']}x{c['payload']}"
        parts.append(f"{cell}: {c['calls_per_s']:.0f}/s p50 {c['p50_us']:.0f}us{bad}")
    return " | ".join(parts)


def scale_run(env: Env, args: argparse.Namespace, gen_cpus: set[int] | None) -> dict[str, Any]:
    settings = ScaleSettings(
        servers=args.scale_servers,
        tools=args.scale_tools,
        idle_connections=args.idle_connections,
        list_repeats=3 if args.quick else 5,
        latency_duration=0.5 if args.quick else 2.0,
        startup_rounds=args.startup_rounds,
    )
    print(
        f"\nscale: {settings.servers} servers x {settings.tools} tools, {settings.sleep} s"
        f" start-up each ({settings.startup_rounds} round(s) against the floor), then"
        f" {settings.idle_connections} idle connections"
    )

    def latency(target_args: list[str], tool: str) -> dict[str, Any]:
        launch = Launch(target_args, tool)
        return run_loadgen(launch, "1:64", settings.latency_duration, 0.2, gen_cpus)

    try:
        return run_scale(env, settings, latency)
    except (TargetUnavailable, LoadgenFailed, OSError) as exc:
        print(f"  SKIPPED: {exc}")
        return {"skipped": str(exc)}


def memory_run(env: Env, args: argparse.Namespace, scale: dict[str, Any] | None) -> dict[str, Any]:
    settings = MemorySettings(
        connections=args.idle_connections, list_repeats=3 if args.quick else 5
    )
    print(
        f"\nmemory: 1 server with {settings.connections} idle agents (each era), then"
        f" {settings.servers[0]} and {settings.servers[1]} servers"
    )
    many_tools = None
    if scale and "skipped" not in scale:
        many_tools = scale["memory_after_list"]
    try:
        return run_memory(env, settings, many_tools)
    except (TargetUnavailable, OSError) as exc:
        print(f"  SKIPPED: {exc}")
        return {"skipped": str(exc)}


def shared_run(env: Env, args: argparse.Namespace) -> dict[str, Any]:
    print(f"\nshared instances: {', '.join(map(str, args.shared_sessions))} host session(s)")
    try:
        return run_shared(env, args.shared_sessions)
    except (TargetUnavailable, OSError, subprocess.CalledProcessError) as exc:
        print(f"  SKIPPED: {exc}")
        return {"skipped": str(exc), "servers": [], "notes": []}


if __name__ == "__main__":
    sys.exit(main())
