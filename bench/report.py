"""Medians over rounds, the results table, and the targets judged MET / NOT MET."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

METRICS = (
    "calls_per_s", "p50_us", "p90_us", "p99_us", "cpu_us_per_call", "loadgen_cpu",
    "upstream_cpu_us_per_call",
)  # fmt: skip
Cell = tuple[int, int]  # (concurrency, payload bytes)


def median_cells(reports: list[dict[str, Any]]) -> dict[Cell, dict[str, Any]]:
    """Per cell: the median of each metric over the rounds, plus errors and checks."""
    by_cell: dict[Cell, list[dict[str, Any]]] = {}
    for report in reports:
        for cell in report["cells"]:
            by_cell.setdefault((cell["concurrency"], cell["payload"]), []).append(cell)
    out: dict[Cell, dict[str, Any]] = {}
    for key, cells in by_cell.items():
        agg: dict[str, Any] = {"rounds": len(cells)}
        for metric in METRICS:
            values = [c[metric] for c in cells if _finite(c.get(metric))]
            agg[metric] = statistics.median(values) if values else None
        agg["errors"] = sum(c["errors"] for c in cells)
        agg["checks"] = sorted({c["check"] for c in cells if c.get("check") != "ok"})
        out[key] = agg
    return out


def median_memory(reports: list[dict[str, Any]]) -> dict[str, float | None]:
    """Peak RSS in MB at the end of each run (VmHWM only grows), median over the rounds."""
    last = [r["cells"][-1] for r in reports if r.get("cells")]
    main = [c["target_main_memory"]["hwm_kb"] for c in last if "target_main_memory" in c]
    tree = [c["target_memory"]["hwm_kb"] for c in last if "target_memory" in c]
    return {
        "main_peak_mb": statistics.median(main) / 1024 if main else None,
        "tree_peak_mb": statistics.median(tree) / 1024 if tree else None,
    }


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _fmt(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_table(summary: dict[str, Any]) -> None:
    """The matrix, a row per configuration and cell; ``upstream`` is the CPU per call of
    an HTTP upstream (counted in ``cpu us/call`` too)."""
    print()
    print(
        f"{'configuration':<18} {'conc':>4} {'bytes':>6} {'calls/s':>9} {'p50 us':>8}"
        f" {'p90 us':>8} {'p99 us':>8} {'cpu us/call':>11} {'upstream':>8} {'gen cpu':>7}"
        "  peak RSS MB main/tree"
    )
    for name, data in summary.items():
        if "cells" not in data:
            print(f"{name:<18} skipped: {data.get('skipped', 'no data').splitlines()[0]}")
            continue
        mem = data["memory"]
        rss = f"{_fmt(mem['main_peak_mb'], 1)}/{_fmt(mem['tree_peak_mb'], 1)}"
        for (conc, payload), c in sorted(data["cells"].items()):
            flag = ""
            if c["errors"]:
                flag += f"  {c['errors']} errors"
            if c["checks"]:
                flag += f"  check: {'; '.join(c['checks'])}"
            print(
                f"{name:<18} {conc:>4} {payload:>6} {_fmt(c['calls_per_s']):>9}"
                f" {_fmt(c['p50_us']):>8} {_fmt(c['p90_us']):>8} {_fmt(c['p99_us']):>8}"
                f" {_fmt(c['cpu_us_per_call'], 1):>11} {_fmt(c['upstream_cpu_us_per_call'], 1):>8}"
                f" {_fmt(c['loadgen_cpu'], 2):>7}  {rss}{flag}"
            )
            rss = ""


@dataclass
class Verdict:
    """One row of the target table: mcpd's figure, what it is held against, the target."""

    figure: str
    value: str  # mcpd's figure, with its unit
    reference: str  # the figure it is divided by, or "-" for an absolute target
    ratio: float | None
    target: str  # "<= 1.25", ">= 0.6", "<= 50 MB"
    met: bool | None  # None: could not be judged (something was skipped)
    why: str = ""  # for a SKIPPED row: what was missing
    numbers: tuple[float | None, float | None, str] = (None, None, "")  # mcpd, reference, unit

    def line(self) -> str:
        word = {True: "MET", False: "NOT MET", None: "SKIPPED"}[self.met]
        ratio = "-" if self.ratio is None else f"{self.ratio:.2f}"
        tail = f"  ({self.why})" if self.why else ""
        return (
            f"  {self.figure:<56} {self.value:>10} {self.reference:>16} {ratio:>6}"
            f"  {self.target:<9} {word}{tail}"
        )


TABLE_HEAD = f"  {'figure':<56} {'mcpd':>10} {'reference':>16} {'ratio':>6}  {'target':<9} verdict"


def _metric(summary: dict[str, Any], name: str, cell: Cell, metric: str) -> float | None:
    value = summary.get(name, {}).get("cells", {}).get(cell, {}).get(metric)
    return value if _finite(value) else None


def _show(value: float, unit: str) -> str:
    if unit == "calls/s":
        return f"{value:,.0f}/s"
    if unit == "s":
        return f"{value:.3f} s"
    return f"{value:.0f} {unit}" if value >= 100 else f"{value:.1f} {unit}"


def ratio_verdict(
    summary: dict[str, Any],
    figure: str,
    cell: Cell,
    metric: str,
    unit: str,
    limit: float,
    at_most: bool,
    judged: str = "mcpd",
    floor: str = "relay",
) -> Verdict:
    """`judged`'s metric over `floor`'s in one cell: at most (or at least) `limit`."""
    target = f"{'<=' if at_most else '>='} {limit:g}"
    ours = _metric(summary, judged, cell, metric)
    theirs = _metric(summary, floor, cell, metric)
    if ours is None or theirs is None or theirs == 0:
        missing = judged if ours is None else floor
        return Verdict(figure, "-", "-", None, target, None, f"no figure for {missing}")
    ratio = ours / theirs
    met = ratio <= limit if at_most else ratio >= limit
    return Verdict(
        figure, _show(ours, unit), f"{floor} {_show(theirs, unit)}", ratio, target, met,
        numbers=(ours, theirs, unit),
    )  # fmt: skip


def absolute_verdict(
    figure: str, value: float | None, unit: str, limit: float, why: str
) -> Verdict:
    target = f"<= {limit:g} {unit}"
    if value is None:
        return Verdict(figure, "-", "-", None, target, None, why)
    return Verdict(
        figure,
        f"{value:.1f} {unit}",
        "-",
        None,
        target,
        value <= limit,
        numbers=(value, None, unit),
    )


def call_path_verdicts(summary: dict[str, Any], judged: str = "mcpd") -> list[Verdict]:
    """The call path's targets for `judged` (mcpd, or the splicer as the floor)."""
    small, big = (1, 64), (1, 16384)
    return [
        ratio_verdict(summary, f"conc 1, 64 B: {judged} p50 / relay p50", small, "p50_us",
                      "us", 1.25, True, judged),
        ratio_verdict(summary, f"conc 1, 64 B: {judged} CPU per call / relay CPU per call",
                      small, "cpu_us_per_call", "us", 1.3, True, judged),
        ratio_verdict(summary, f"conc 32, 64 B: {judged} calls/s / relay calls/s", (32, 64),
                      "calls_per_s", "calls/s", 0.6, False, judged),
        ratio_verdict(summary, f"conc 32, 16 KiB: {judged} calls/s / relay calls/s",
                      (32, 16384), "calls_per_s", "calls/s", 0.6, False, judged),
        ratio_verdict(summary, f"conc 1, 16 KiB: {judged} p50 / relay p50", big, "p50_us",
                      "us", 1.25, True, judged),
    ]  # fmt: skip


# Each peer, and the mcpd row on the same upstream that must be ahead of it.
PEERS = {
    "fastmcp-proxy": "mcpd",
    "fastmcp-proxy-http": "mcpd-http",
    "mcp-proxy": "mcpd-http",
    "mcp-hub": "mcpd-http",
}


def round_three_verdicts(summary: dict[str, Any]) -> list[Verdict]:
    """HTTP upstreams against their floor, the stdio gate raised, and the peers."""
    small = (1, 64)
    out = [
        ratio_verdict(summary, "conc 1, 64 B: mcpd-http p50 / http-relay p50", small, "p50_us",
                      "us", 1.3, True, "mcpd-http", "http-relay"),
        ratio_verdict(summary, "conc 1, 64 B: mcpd-http CPU per call / http-relay's", small,
                      "cpu_us_per_call", "us", 1.3, True, "mcpd-http", "http-relay"),
        ratio_verdict(summary, "conc 32, 64 B: mcpd-http calls/s / http-relay calls/s",
                      (32, 64), "calls_per_s", "calls/s", 0.6, False, "mcpd-http", "http-relay"),
        ratio_verdict(summary, "conc 32, 64 B: mcpd-gate64 calls/s / relay calls/s", (32, 64),
                      "calls_per_s", "calls/s", 0.5, False, "mcpd-gate64"),
    ]  # fmt: skip
    for peer, ours in PEERS.items():
        out.append(ahead_verdict(summary, ours, peer))
    return out


def ahead_verdict(summary: dict[str, Any], ours: str, peer: str) -> Verdict:
    """`ours` ahead of `peer` on every cell: more calls/s and a lower p50. The ratio is
    the closest of those margins (above 1: ahead on all)."""
    figure = f"{ours} ahead of {peer} on every cell"
    cells = sorted(set(summary.get(ours, {}).get("cells", {})) & set(
        summary.get(peer, {}).get("cells", {})))  # fmt: skip
    margins = []
    for cell in cells:
        rate = (_metric(summary, ours, cell, "calls_per_s"),
                _metric(summary, peer, cell, "calls_per_s"))  # fmt: skip
        p50 = _metric(summary, ours, cell, "p50_us"), _metric(summary, peer, cell, "p50_us")
        if None in rate or None in p50 or not rate[1] or not p50[0]:
            continue
        margins.append(min(rate[0] / rate[1], p50[1] / p50[0]))  # type: ignore[operator]
    if not margins:
        missing = peer if "cells" not in summary.get(peer, {}) else ours
        return Verdict(figure, "-", "-", None, "> 1", None, f"no figures for {missing}")
    worst = min(margins)
    return Verdict(figure, f"{worst:.1f}x", "-", worst, "> 1", worst > 1)


def peer_lines(summary: dict[str, Any]) -> list[str]:
    """Each peer's cells beside the mcpd row on the same upstream: how many times
    mcpd's calls/s theirs is, and theirs its p50."""
    out = [
        f"  {'peer':<20} {'conc':>4} {'bytes':>6} {'calls/s':>9} {'mcpd':>9} {'x':>6}"
        f" {'p50 us':>9} {'mcpd':>8} {'x':>6}"
    ]
    for peer, ours in PEERS.items():
        cells = summary.get(peer, {}).get("cells", {})
        for cell in sorted(cells):
            rate = _metric(summary, peer, cell, "calls_per_s")
            p50 = _metric(summary, peer, cell, "p50_us")
            our_rate = _metric(summary, ours, cell, "calls_per_s")
            our_p50 = _metric(summary, ours, cell, "p50_us")
            faster = our_rate / rate if rate and our_rate else None
            quicker = p50 / our_p50 if p50 and our_p50 else None
            out.append(
                f"  {peer:<20} {cell[0]:>4} {cell[1]:>6} {_fmt(rate):>9} {_fmt(our_rate):>9}"
                f" {_fmt(faster, 1):>6} {_fmt(p50):>9} {_fmt(our_p50):>8} {_fmt(quicker, 1):>6}"
            )
    return out


def round_two_verdicts(
    summary: dict[str, Any], scale: dict[str, Any] | None, memory: dict[str, Any] | None
) -> list[Verdict]:
    """The targets of the second performance round, judged on one interleaved run."""
    out = call_path_verdicts(summary)
    ran = scale is not None and "skipped" not in scale
    scale_why = (scale or {}).get("skipped", "scale run not run").splitlines()[0]
    mem_ran = memory is not None and "skipped" not in memory
    mem_why = (memory or {}).get("skipped", "memory run not run").splitlines()[0]
    peak = None
    tools = 10000
    if ran and scale is not None:
        peak = scale["memory_after_list"]["hwm_kb"] / 1024
        tools = scale["tools_list"]["tools"]
    elif mem_ran and memory is not None:
        peak = memory["many_tools"]["hwm_kb"] / 1024
        tools = memory["many_tools"]["listed"]
    out.append(
        absolute_verdict(f"RSS, {tools:,} tools listed, peak", peak, "MB", 50, scale_why)
    )  # fmt: skip
    per_conn = memory.get("per_connection_kib") if mem_ran and memory is not None else None
    out.append(
        absolute_verdict("RSS per idle agent connection (worse era)", per_conn, "KiB", 20,
                         mem_why)
    )  # fmt: skip
    figure = "50 servers x 0.5 s start-up: ready / floor without mcpd"
    if ran and scale is not None:
        st = scale["settings"]
        figure = f"{st['servers']} servers x {st['sleep']:g} s start-up: ready / floor without mcpd"
        ready, floor = scale["ready_s"], scale["servers_alone_s"]
        ratio = ready / floor
        out.append(
            Verdict(figure, _show(ready, "s"), f"floor {_show(floor, 's')}", ratio, "<= 1.1",
                    ratio <= 1.1, numbers=(ready, floor, "s"))
        )  # fmt: skip
    else:
        out.append(Verdict(figure, "-", "-", None, "<= 1.1", None, scale_why))
    return out


def scale_lines(scale: dict[str, Any] | None) -> list[str]:
    """The scale figures that have no target: start-up detail, idle connections."""
    if not scale or "skipped" in scale:
        return []
    mem = scale["memory_after_list"]
    ready_mem = scale["memory_after_ready"]
    st = scale["startup"]
    rounds = ", ".join(f"{m:.3f}/{f:.3f}" for m, f in zip(st["mcpd_s"], st["floor_s"], strict=True))
    by = "; ".join(sorted(set(st["ready_by"])))
    listing = scale["tools_list"]
    lines = [
        f"  start-up, median of {len(st['mcpd_s'])} interleaved round(s): mcpd ready"
        f" {scale['ready_s']:.3f} s ({by}), floor {scale['servers_alone_s']:.3f} s"
        f" = {scale['ready_s'] / scale['servers_alone_s']:.2f}x",
        f"    rounds mcpd/floor s: {rounds}",
        f"    floor: bench/launcher.py starts the same servers at once, initialize + every"
        f" tools/list page each; its own CPU {statistics.median(st['launcher_cpu_s']):.2f} s,"
        f" mcpd's CPU to ready {scale['daemon_cpu_to_ready_s']:.2f} s",
        f"  full paged tools/list: median {listing['median_ms']:.1f} ms (first"
        f" {listing['first_ms']:.1f} ms), {listing['tools']} tools in {listing['pages']} page(s)",
        f"  daemon RSS: {ready_mem['rss_kb'] / 1024:.1f} MB (peak {ready_mem['hwm_kb'] / 1024:.1f}"
        f" MB) when ready, {mem['rss_kb'] / 1024:.1f} MB (peak {mem['hwm_kb'] / 1024:.1f} MB)"
        " after the listings",
    ]
    idle = scale["idle"]
    before = scale["latency_without_idle"]
    during = scale["latency_with_idle"]
    grown = (scale["memory_with_idle"]["rss_kb"] - scale["memory_before_idle"]["rss_kb"]) / 1024
    per_conn = grown * 1024 / max(1, idle["answered"])
    lines.append(
        f"  idle agents: {idle['answered']}/{idle['requested']} connections answered discover"
        f" in {idle['open_s']:.2f} s"
        + (f"; failures: {idle['first_failures']}" if idle["failures"] else "")
    )
    lines.append(
        f"  with them: RSS {scale['memory_before_idle']['rss_kb'] / 1024:.1f} ->"
        f" {scale['memory_with_idle']['rss_kb'] / 1024:.1f} MB (+{grown:.1f} MB,"
        f" {per_conn:.1f} KB per connection)"
    )
    lines.append(
        f"  call latency (conc 1, 64 B): p50 {before['p50_us']:.0f} -> {during['p50_us']:.0f} us"
        f" ({during['p50_us'] / before['p50_us']:.2f}x), p99 {before['p99_us']:.0f} ->"
        f" {during['p99_us']:.0f} us"
    )
    return lines
