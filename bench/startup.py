"""The start-up benchmark alone, with the servers' sandbox on (the default) and off.

``python -m bench.startup`` starts 50 stdio echo servers x 200 tools, each sleeping
0.5 s before it answers (the scale run's servers), in interleaved rounds: the floor
(``bench/launcher.py``, the same servers without mcpd), mcpd with the default sandbox,
and mcpd with ``sandbox = "off"`` and no limits (every server started as it is). Then
the cost of one sandboxed start on its own: a trivial command started and waited for,
bare and through bubblewrap and prlimit as mcpd starts a server, ``--starts`` times each,
interleaved, with the wall time and the CPU time of the process that starts them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import procstat, targets
from bench.hosts import Sessions, server_spec
from bench.scale import echo_servers, scale_server_command
from bench.targets import Env, TargetUnavailable, running_mcpd

RESULTS = Path(__file__).with_name("results")
UNSANDBOXED = {"sandbox": "off", "limits": {"memory": 0, "processes": 0}}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__)
    p.add_argument("--servers", type=int, default=50)
    p.add_argument("--tools", type=int, default=200)
    p.add_argument("--sleep", type=float, default=0.5)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--starts", type=int, default=50, help="starts per kind for the cost")
    p.add_argument("--mcpd", help="command that runs mcpd's CLI (default: the venv's mcpd)")
    p.add_argument("--output", type=Path, help="JSON results file")
    return p.parse_args(argv)


def startup_rounds(env: Env, args: argparse.Namespace) -> dict[str, list[float]]:
    command = scale_server_command(args.tools, args.sleep)
    servers = echo_servers(args.servers, args.tools, args.sleep)
    out: dict[str, list[float]] = {
        "floor_s": [], "sandboxed_s": [], "unsandboxed_s": [],
        "sandboxed_cpu_s": [], "unsandboxed_cpu_s": [],
    }  # fmt: skip
    for r in range(args.rounds):
        with Sessions(
            env.workdir, env.logdir, "startup-floor", [server_spec(command)], copies=args.servers
        ) as floor:
            out["floor_s"].append(floor.ready_s)
        for kind, options in (("sandboxed", {}), ("unsandboxed", UNSANDBOXED)):
            with running_mcpd(env, f"startup-{kind}", servers, None, options, timeout=60) as d:
                out[f"{kind}_s"].append(d.ready_s)
                out[f"{kind}_cpu_s"].append(procstat.process_cpu_seconds(d.proc.pid))
        print(
            f"  round {r + 1}/{args.rounds}: floor {out['floor_s'][-1]:.3f} s, sandbox on"
            f" {out['sandboxed_s'][-1]:.3f} s, off {out['unsandboxed_s'][-1]:.3f} s",
            flush=True,
        )
    return out


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def start_cost(starts: int, workdir: Path) -> dict[str, Any]:
    """One start of ``true`` (the command itself does nothing), bare and sandboxed as a
    default-level server with the default limits: wall time to its exit, and this
    process's CPU for the start (what mcpd's event loop pays)."""
    from transports.stdio.process.childenv import environment
    from transports.stdio.process.launch import launch
    from transports.stdio.sandbox.host import command_line, probe
    from transports.stdio.sandbox.limits import Limits
    from transports.stdio.sandbox.plan import Sandbox

    machine = probe()
    if machine.bwrap is None or machine.namespaces is not None:
        return {"skipped": machine.namespaces or "bwrap not found"}
    sandbox = Sandbox(
        home=str(workdir / "homes" / "bench"),
        hide=(str(workdir / "state"), str(Path.home() / ".ssh")),
        limits=Limits(memory=4 << 30, processes=1024),
        alias="bench",
        where="servers.bench",
    )
    env = environment(False, None)
    times: dict[str, list[float]] = {"bare": [], "sandboxed": []}
    cpu: dict[str, list[float]] = {"bare": [], "sandboxed": []}
    for _ in range(starts):
        for kind in ("bare", "sandboxed"):
            t0, c0 = time.perf_counter(), _cpu()
            if kind == "bare":
                child = launch(["/bin/true"], env=env, stdin=False, stdout=False, stderr=False)
            else:
                plan, cwd = command_line(["/bin/true"], env, None, sandbox)
                child = launch(plan.argv, env=env, cwd=cwd, stdin=False, stdout=False, stderr=False)
            c1 = _cpu()
            child.popen.wait()
            times[kind].append(time.perf_counter() - t0)
            cpu[kind].append(c1 - c0)
    med = {k: statistics.median(v) for k, v in times.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    return {
        "starts": starts,
        "wall_ms": {k: v * 1000 for k, v in med.items()},
        "starter_cpu_ms": {k: v * 1000 for k, v in med_cpu.items()},
        "cost_wall_ms": (med["sandboxed"] - med["bare"]) * 1000,
        "cost_starter_cpu_ms": (med_cpu["sandboxed"] - med_cpu["bare"]) * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    logdir = RESULTS / f"logs-startup-{stamp}"
    logdir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="mcpd-bench-"))
    mcpd_cmd, note = targets.find_mcpd(args.mcpd)
    env = Env(workdir=workdir, logdir=logdir, target_cpus=None, mcpd=mcpd_cmd)
    print(f"start-up: {args.servers} servers x {args.tools} tools, {args.sleep} s each; {note}")
    try:
        rounds = startup_rounds(env, args)
    except TargetUnavailable as exc:
        print(f"  SKIPPED: {exc}")
        return 1
    med = {k: statistics.median(v) for k, v in rounds.items()}
    floor = med["floor_s"]
    print(f"\nstart-up, median of {args.rounds} interleaved round(s), {args.servers} servers:")
    print(f"  floor without mcpd   {floor:.3f} s")
    for kind, label in (("sandboxed", "sandbox on (default)"), ("unsandboxed", "sandbox off")):
        print(
            f"  mcpd, {label:<20} {med[kind + '_s']:.3f} s = {med[kind + '_s'] / floor:.2f}x"
            f" floor; mcpd's CPU to ready {med[kind + '_cpu_s']:.2f} s"
        )
    cost = start_cost(args.starts, workdir)
    if "skipped" in cost:
        print(f"  cost per start: SKIPPED ({cost['skipped']})")
    else:
        w, c = cost["wall_ms"], cost["starter_cpu_ms"]
        print(
            f"\ncost of one start, median of {cost['starts']}: bare {w['bare']:.1f} ms,"
            f" sandboxed {w['sandboxed']:.1f} ms (+{cost['cost_wall_ms']:.1f} ms wall);"
            f" the starter's CPU {c['bare']:.2f} ms vs {c['sandboxed']:.2f} ms"
            f" (+{cost['cost_starter_cpu_ms']:.2f} ms)"
        )
    output = args.output or RESULTS / f"startup-{stamp}.json"
    output.write_text(json.dumps({"rounds": rounds, "median": med, "start_cost": cost}, indent=1))
    print(f"\nraw results: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
