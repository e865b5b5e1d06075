"""``GET /metrics``: the daemon's counters in Prometheus' text exposition format.

Per server: its state, tool count, calls, errors, a latency histogram (cumulative
buckets from ``stats.Histogram``), restarts and circuit-breaker openings. Counters
start again from zero when a server is restarted by a reload, which Prometheus
handles as a counter reset.
"""

from __future__ import annotations

from collections.abc import Mapping

import trio

from ... import __version__
from ...local.prometheus import Writer, number
from ...registry.tables.table import ToolTable
from ..life.server_parts import ServerParts
from .state import STATES


def render_server_metrics(
    servers_by_alias: Mapping[str, ServerParts], registry: ToolTable, tools: int, connections: int
) -> str:
    """The servers of ``servers_by_alias``; ``tools`` and ``connections`` are what the
    reader's agents are listed and how many of them are connected."""
    out = Writer()
    now = trio.current_time()
    servers = [servers_by_alias[a] for a in sorted(servers_by_alias)]

    out.family("mcpd_info", "gauge", "mcpd's version.")
    out.sample("mcpd_info", {"version": __version__}, 1)
    out.family("mcpd_tools", "gauge", "Tools in the aggregated list agents get.")
    out.sample("mcpd_tools", {}, tools)
    out.family("mcpd_agent_connections", "gauge", "Open agent connections on the socket.")
    out.sample("mcpd_agent_connections", {}, connections)

    out.family("mcpd_server_up", "gauge", "1 when calls to the server are expected to work.")
    for r in servers:
        out.sample("mcpd_server_up", {"server": r.alias}, 1 if r.available else 0)
    out.family("mcpd_server_state", "gauge", "1 for the server's current state, 0 for the others.")
    for r in servers:
        state = r.state
        for s in STATES:
            out.sample("mcpd_server_state", {"server": r.alias, "state": s}, int(s == state))
    out.family("mcpd_server_tools", "gauge", "Tools the server contributes, listed or last known.")
    for r in servers:
        out.sample("mcpd_server_tools", {"server": r.alias}, registry.count(r.alias))

    out.family(
        "mcpd_tool_calls_total", "counter", "tools/call requests the server answered or failed."
    )
    for r in servers:
        out.sample("mcpd_tool_calls_total", {"server": r.alias}, r.stats.calls)
    out.family(
        "mcpd_tool_call_errors_total",
        "counter",
        "Calls that failed: timeouts, lost connections, JSON-RPC errors.",
    )
    for r in servers:
        out.sample("mcpd_tool_call_errors_total", {"server": r.alias}, r.stats.errors)
    name = "mcpd_tool_call_duration_seconds"
    out.family(name, "histogram", "Time from forwarding a call to its answer.")
    for r in servers:
        hist = r.stats.histogram
        for bound, count in hist.cumulative():
            out.sample(f"{name}_bucket", {"server": r.alias, "le": number(bound)}, count)
        out.sample(f"{name}_sum", {"server": r.alias}, hist.sum)
        out.sample(f"{name}_count", {"server": r.alias}, hist.count)

    out.family("mcpd_server_restarts_total", "counter", "Restarts after the server failed.")
    for r in servers:
        out.sample("mcpd_server_restarts_total", {"server": r.alias}, r.policy.restarts)
    out.family("mcpd_breaker_opens_total", "counter", "Times the server's circuit breaker opened.")
    for r in servers:
        opened = r.breaker.status(now).times_opened
        out.sample("mcpd_breaker_opens_total", {"server": r.alias}, opened)
    return "\n".join(out.lines) + "\n"
