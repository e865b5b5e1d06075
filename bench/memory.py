"""Memory that scales: the daemon's RSS (VmRSS, VmHWM of the daemon process alone) at a few
points, and the growth per agent connection, per server and per tool, each from two points
so that the fixed cost cancels.

  idle            1 echo server (1 tool); ready, one agent has listed the tools and left
  + connections   the same daemon with 1,000 idle agents (server/discover); a second such
                  daemon with 1,000 legacy agents (initialize + notifications/initialized)
  few servers     50 servers x 20 tools = 1,000 tools, after a full paged tools/list
  many tools      50 servers x 200 tools = 10,000 tools, listed (the scale run's daemon)
  restarted       the same, started again on the state the first start left: its pins and
                  last known tools read back, every list judged against the pins again
  many servers    200 servers x 5 tools = 1,000 tools, listed

per connection = (with - idle) / connections; per tool = (many tools - few servers) / 9,000
(same 50 servers); per server = (many servers - few servers) / 150 (same 1,000 tools).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import procstat
from bench.scale import IdleAgents, echo_servers, time_tools_list
from bench.targets import Env, running_mcpd


@dataclass
class MemorySettings:
    connections: int = 1000
    servers: tuple[int, int] = (50, 200)  # few, many
    tools: tuple[int, int] = (1000, 10000)  # total over the "few" servers: few, many
    list_repeats: int = 5


def listed_point(
    env: Env, name: str, servers: int, tools_each: int, repeats: int
) -> dict[str, Any]:
    """Start a daemon with these servers, list every tool ``repeats`` times, read its RSS."""
    with running_mcpd(env, name, echo_servers(servers, tools_each), None, timeout=120) as daemon:
        listing = time_tools_list(daemon.socket, repeats)
        return {
            "servers": servers,
            "tools": servers * tools_each,
            "listed": listing["tools"],
            "ready_s": daemon.ready_s,
            **procstat.memory_kb(daemon.proc.pid),
        }


def restarted_point(
    env: Env, name: str, servers: int, tools_each: int, repeats: int
) -> dict[str, Any]:
    """``listed_point`` for a daemon started a second time on the state of the first."""
    state = Path(tempfile.mkdtemp(prefix=f"{name}-state-", dir=env.workdir))
    spec = echo_servers(servers, tools_each)
    options = {"state_dir": str(state)}
    with running_mcpd(env, name + "-first", spec, None, options, timeout=120) as daemon:
        time_tools_list(daemon.socket, 1)
    with running_mcpd(env, name, spec, None, options, timeout=120) as daemon:
        listing = time_tools_list(daemon.socket, repeats)
        return {
            "servers": servers,
            "tools": servers * tools_each,
            "listed": listing["tools"],
            "ready_s": daemon.ready_s,
            "restarted": True,
            **procstat.memory_kb(daemon.proc.pid),
        }


def connections_point(env: Env, name: str, count: int, modern: bool) -> dict[str, Any]:
    """One server; RSS once one agent has listed and left, then with ``count`` idle agents."""
    options = {"max_connections": count + 64}
    with running_mcpd(env, name, echo_servers(1, 1), None, options) as daemon:
        pid = daemon.proc.pid
        time_tools_list(daemon.socket, 1)  # code paths a first agent wakes are not per agent
        idle = procstat.memory_kb(pid)
        with IdleAgents(str(daemon.socket), count, modern=modern) as agents:
            summary = agents.summary()
            held = procstat.memory_kb(pid)
    answered = summary["answered"]
    return {
        "era": "modern" if modern else "legacy",
        "idle": idle,
        "with_agents": held,
        "agents": summary,
        "per_connection_kib": (held["rss_kb"] - idle["rss_kb"]) / answered if answered else None,
    }


def run_memory(
    env: Env, settings: MemorySettings, many_tools: dict[str, Any] | None
) -> dict[str, Any]:
    """``many_tools``: the scale run's 50 x 200 daemon after listing (VmRSS/VmHWM), if it ran;
    else that point is measured here too."""
    few_servers, many_servers = settings.servers
    few_tools, many_tools_n = settings.tools
    out: dict[str, Any] = {"settings": settings.__dict__.copy()}
    out["modern"] = connections_point(env, "mem-conn-modern", settings.connections, True)
    out["legacy"] = connections_point(env, "mem-conn-legacy", settings.connections, False)
    out["few_servers"] = listed_point(
        env, "mem-few-servers", few_servers, few_tools // few_servers, settings.list_repeats
    )
    if many_tools is None:
        out["many_tools"] = listed_point(
            env, "mem-many-tools", few_servers, many_tools_n // few_servers, settings.list_repeats
        )
    else:
        out["many_tools"] = {
            "servers": few_servers,
            "tools": many_tools_n,
            "listed": many_tools_n,
            "from": "scale run",
            **many_tools,
        }
    out["restarted"] = restarted_point(
        env, "mem-restarted", few_servers, many_tools_n // few_servers, settings.list_repeats
    )
    out["many_servers"] = listed_point(
        env, "mem-many-servers", many_servers, few_tools // many_servers, settings.list_repeats
    )
    base = out["few_servers"]
    out["per_tool_bytes"] = (
        (out["many_tools"]["rss_kb"] - base["rss_kb"]) * 1024 / (many_tools_n - few_tools)
    )
    out["per_server_kib"] = (out["many_servers"]["rss_kb"] - base["rss_kb"]) / (
        many_servers - few_servers
    )
    per_conn = [out[era]["per_connection_kib"] for era in ("modern", "legacy")]
    known = [v for v in per_conn if v is not None]
    out["per_connection_kib"] = max(known) if known else None
    return out


def _mb(point: dict[str, Any]) -> str:
    return f"{point['rss_kb'] / 1024:6.1f} / {point['hwm_kb'] / 1024:6.1f} MB"


def memory_lines(mem: dict[str, Any] | None) -> list[str]:
    if not mem or "skipped" in mem:
        return [f"  skipped: {(mem or {}).get('skipped', 'not run')}"] if mem else []
    lines = ["  daemon process only, VmRSS / VmHWM"]
    for era, label in (("modern", "server/discover"), ("legacy", "initialize")):
        point = mem[era]
        agents = point["agents"]
        lines.append(f"  {'idle, 1 server (1 tool)':<44} {_mb(point['idle'])}  ({era} run)")
        failed = f", {agents['failures']} failed" if agents["failures"] else ""
        held = f"+ {agents['answered']:,} idle agents ({label})"
        lines.append(
            f"  {held:<44} {_mb(point['with_agents'])}"
            f"  ({agents['open_s']:.2f} s to connect{failed})"
        )
    for key in ("few_servers", "many_tools", "restarted", "many_servers"):
        point = mem.get(key)
        if point is None:
            continue
        label = f"{point['servers']} servers, {point['tools']:,} tools listed"
        if point.get("restarted"):
            label += ", restarted"
        where = " (the scale run's daemon)" if point.get("from") else ""
        short = "" if point["listed"] == point["tools"] else f"  only {point['listed']} listed!"
        lines.append(f"  {label:<44} {_mb(point)}{where}{short}")
    modern, legacy = mem["modern"]["per_connection_kib"], mem["legacy"]["per_connection_kib"]
    lines.append(
        f"  growth: {_num(modern, 1)} KiB per connection (discover),"
        f" {_num(legacy, 1)} KiB (initialize); {mem['per_server_kib']:.1f} KiB per server;"
        f" {mem['per_tool_bytes']:.0f} B per tool"
    )
    return lines


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
