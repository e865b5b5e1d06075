"""``GET /metrics`` over servers built but never run: every family a scraper reads,
one sample per server, each counter where the server's parts keep it."""

from __future__ import annotations

import msgspec
import trio

from mcpd import __version__
from mcpd.config.loading.load import parse_config
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.life.server_parts import ServerParts
from mcpd.servers.status.metrics import render_server_metrics
from mcpd.servers.status.state import STATES
from protocol.mcp import core as mcp
from tests.support.reading.exposition import Family, parse

SCHEMA = msgspec.Raw(b'{"type":"object"}')


def runners(*aliases: str) -> tuple[dict[str, ServerParts], Catalog]:
    config = parse_config({"servers": {a: {"command": "srv"} for a in aliases}}, env={})
    catalog = Catalog(config.naming)
    built = {
        a: ServerParts(a, config.servers[a], config, catalog, lambda alias: None) for a in aliases
    }
    return built, catalog


def by_server(family: Family, name: str | None = None) -> dict[str, str]:
    return {
        labels["server"]: value
        for sample, labels, value in family.samples
        if name is None or sample == name
    }


async def test_no_servers_is_still_a_page_a_scraper_reads() -> None:
    found = parse(render_server_metrics({}, Catalog(parse_config({}, env={}).naming), 0, 0))
    assert found["mcpd_info"].samples == [("mcpd_info", {"version": __version__}, "1")]
    assert found["mcpd_tools"].samples == [("mcpd_tools", {}, "0")]
    assert found["mcpd_server_up"].samples == []


async def test_each_server_has_its_state_tools_and_counters() -> None:
    built, catalog = runners("zeta", "alpha")
    up, down = built["alpha"], built["zeta"]
    up.downtime.set_phase("connected")
    catalog.update("alpha", [mcp.Tool(name=n, inputSchema=SCHEMA) for n in ("a", "b", "c")])
    for duration, error in ((0.001, False), (0.2, True), (100.0, True)):
        up.stats.record(duration, error=error)
    now = trio.current_time()
    for _ in range(down.breaker.config.failure_threshold):
        down.breaker.record_failure(now, "gone")
    down.policy.on_failure(now)
    found = parse(render_server_metrics(built, catalog, tools=3, connections=2))
    assert [labels["server"] for _, labels, _ in found["mcpd_server_up"].samples] == [
        "alpha",
        "zeta",
    ]
    assert by_server(found["mcpd_server_up"]) == {"alpha": "1", "zeta": "0"}
    assert found["mcpd_agent_connections"].samples == [("mcpd_agent_connections", {}, "2")]
    assert by_server(found["mcpd_server_tools"]) == {"alpha": "3", "zeta": "0"}
    assert by_server(found["mcpd_tool_calls_total"]) == {"alpha": "3", "zeta": "0"}
    assert by_server(found["mcpd_tool_call_errors_total"]) == {"alpha": "2", "zeta": "0"}
    assert by_server(found["mcpd_breaker_opens_total"]) == {"alpha": "0", "zeta": "1"}
    assert by_server(found["mcpd_server_restarts_total"]) == {"alpha": "0", "zeta": "1"}
    assert found["mcpd_tool_calls_total"].kind == "counter"


async def test_each_server_is_in_exactly_one_state() -> None:
    built, catalog = runners("a", "b")
    built["a"].downtime.set_phase("connected")
    states = parse(render_server_metrics(built, catalog, 0, 0))["mcpd_server_state"]
    for alias in ("a", "b"):
        mine = {s["state"]: v for _, s, v in states.samples if s["server"] == alias}
        assert set(mine) == set(STATES)
        assert sorted(mine.values()) == ["0"] * (len(STATES) - 1) + ["1"]
    assert {s["state"] for _, s, v in states.samples if v == "1" and s["server"] == "a"} == {
        "ready"
    }


async def test_the_latency_histogram_is_cumulative_and_ends_in_every_call() -> None:
    built, catalog = runners("a")
    durations = [0.0005, 0.003, 0.003, 0.7, 12.0, 1e6]
    for d in durations:
        built["a"].stats.record(d)
    family = parse(render_server_metrics(built, catalog, 0, 0))["mcpd_tool_call_duration_seconds"]
    assert family.kind == "histogram"
    buckets = [
        (labels["le"], int(value))
        for name, labels, value in family.samples
        if name.endswith("_bucket")
    ]
    bounds = [float(le.replace("Inf", "inf")) for le, _ in buckets]
    assert bounds == sorted(bounds) and buckets[-1][0] == "+Inf"
    counts = [n for _, n in buckets]
    assert counts == sorted(counts) and counts[-1] == len(durations)
    for le, n in buckets:
        assert n == sum(1 for d in durations if d <= float(le.replace("Inf", "inf")))
    assert by_server(family, "mcpd_tool_call_duration_seconds_count") == {"a": "6"}
    assert float(by_server(family, "mcpd_tool_call_duration_seconds_sum")["a"]) == sum(durations)
