"""Load with trouble: 50 agents with 20 calls in flight each, for a bounded time, against
fast, slow and failing servers (stdio and HTTP), while one server is SIGKILLed (and
restarted by mcpd) twice and the configuration is reloaded twice.

Every call must be answered exactly once; every call to a healthy server (fast, slow,
HTTP) must succeed, because nothing that happens to the others may reach them.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
from pathlib import Path
from typing import Any

import trio

from tests.support.daemons.fault_harness import (
    Agent,
    Case,
    hostile,
    is_error_result,
    run_case,
    text_of,
)
from tests.support.hostile.http_server import HostileHttp, serve_hostile_http
from tests.support.system.procs import host_pid

AGENTS = 50
PER_AGENT = 20
DURATION = 15.0

# (tool, share of the calls, must it succeed)
MIX: list[tuple[str, int, bool]] = [
    ("mcp__fast__echo", 30, True),
    ("mcp__slow__slow", 15, True),
    ("mcp__web__echo", 20, True),
    ("mcp__victim__echo", 10, False),  # killed twice: calls fail while it is down
    ("mcp__failing__never", 5, False),  # times out
    ("mcp__failing__exit", 2, False),  # the server dies under the call
    ("mcp__failing__echo", 8, False),  # fine, unless failing is down or restarting
    ("mcp__webbad__chunked_cut", 5, False),  # stream cut (its own alias, its own breaker)
    ("mcp__nosuch__tool", 5, False),  # unknown tool
]


def servers(pids: Path, web: HostileHttp, failing_flags: tuple[str, ...] = ()) -> dict[str, Any]:
    (pids / "victim").mkdir(exist_ok=True)
    return {
        "fast": hostile(pids, max_concurrency=16),
        "slow": hostile(pids, max_concurrency=16),
        "victim": {**hostile(pids / "victim", max_concurrency=8)},
        "failing": hostile(pids, *failing_flags, max_concurrency=8, call_timeout=1.0),
        "web": {"url": web.url(), "max_concurrency": 16},
        "webbad": {"url": web.url(), "max_concurrency": 4},
    }


class Load:
    def __init__(self) -> None:
        self.calls = 0
        self.healthy_ok = 0
        self.healthy_failed: list[str] = []
        self.by_tool: dict[str, int] = {}


async def worker(a: Agent, rng: random.Random, until: float, load: Load) -> None:
    tools = [t for t, _, _ in MIX]
    weights = [w for _, w, _ in MIX]
    must = {t: m for t, _, m in MIX}
    i = 0
    while trio.current_time() < until:
        tool = rng.choices(tools, weights)[0]
        text = f"{a.name}-{i}"
        reply = await a.call(tool, text, timeout=60)
        load.calls += 1
        load.by_tool[tool] = load.by_tool.get(tool, 0) + 1
        if must[tool]:
            short = tool.rsplit("__", 1)[1]
            if text_of(reply) == f"{short}:{text}" and not is_error_result(reply):
                load.healthy_ok += 1
            else:
                load.healthy_failed.append(f"{tool}: {str(reply)[:300]}")
        i += 1


async def kill_victim(case: Case, probe: Agent) -> None:
    victim_dir = case.workdir / "pids" / "victim"
    for _ in range(2):
        await trio.sleep(3)
        before = await restarts_of(case, probe, "victim")
        live = []
        for p in victim_dir.iterdir():
            with contextlib.suppress(OSError, ValueError):  # gone, or still being written
                live.append(host_pid(p.read_text()))
        for pid in live:
            os.kill(pid, signal.SIGKILL)
        # The restart can be over before a status poll sees the server down (a
        # fresh process answers in milliseconds), so the counter is the witness.
        with trio.fail_after(30):
            while await restarts_of(case, probe, "victim") <= before:
                await trio.sleep(0.05)
        await case.wait_state(probe, "victim", {"ready", "degraded"}, timeout=30)


async def restarts_of(case: Case, probe: Agent, alias: str) -> int:
    for s in (await case.status(probe))["servers"]:
        if s["alias"] == alias:
            return int(s["restarts"])
    raise AssertionError(f"{alias} missing from status")


async def test_load_with_kills_and_reloads() -> None:
    async with serve_hostile_http() as web:
        load = Load()

        async def body(case: Case) -> None:
            pids = case.workdir / "pids"
            base = {"steady": case.daemon.servers["steady"]}
            async with case.agent() as probe, trio.open_nursery() as nursery:
                until = trio.current_time() + DURATION
                for n in range(AGENTS):
                    nursery.start_soon(agent_session, case, n, until, load)
                nursery.start_soon(kill_victim, case, probe)
                # Two reloads under load: one adds a server, one removes it again and
                # changes the failing one (restarting it); the others must not notice.
                await trio.sleep(5)
                await case.daemon.reload({**base, **servers(pids, web), "extra": hostile(pids)})
                await trio.sleep(4)
                await case.daemon.reload({**base, **servers(pids, web, ("--late", "2"))})
            case.note = (
                f"{load.calls} calls by {AGENTS}x{PER_AGENT} workers in {DURATION:.0f} s, "
                f"{load.healthy_ok} to healthy servers; victim killed twice, 2 reloads"
            )
            assert not load.healthy_failed, load.healthy_failed[:5]

        await run_case(
            "load",
            "50 agents x 20 calls, kills and reloads",
            body,
            servers=lambda pids: servers(pids, web),
            daemon={"queue_size": 4096, "max_connections": 512, "call_timeout": 10.0},
            rss_bound_mib=96,
            timeout=150,
        )


async def agent_session(case: Case, n: int, until: float, load: Load) -> None:
    """One agent with ``PER_AGENT`` calls in flight until ``until``."""
    async with case.agent() as a, trio.open_nursery() as nursery:
        for k in range(PER_AGENT):
            nursery.start_soon(worker, a, random.Random(n * 100 + k), until, load)
