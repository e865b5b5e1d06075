"""Medians over rounds, the results table, and the targets judged MET / NOT MET."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

METRICS = ("calls_per_s", "p50_us", "p90_us", "p99_us", "cpu_us_per_call", "loadgen_cpu")
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
    print()
    print(
        f"{'configuration':<14} {'conc':>4} {'bytes':>6} {'calls/s':>9} {'p50 us':>8}"
        f" {'p90 us':>8} {'p99 us':>8} {'cpu us/call':>11} {'gen cpu':>7}  peak RSS MB main/tree"
    )
    for name, data in summary.items():
        if "cells" not in data:
            print(f"{name:<14} skipped: {data.get('skipped', 'no data').splitlines()[0]}")
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
                f"{name:<14} {conc:>4} {payload:>6} {_fmt(c['calls_per_s']):>9}"
                f" {_fmt(c['p50_us']):>8} {_fmt(c['p90_us']):>8} {_fmt(c['p99_us']):>8}"
                f" {_fmt(c['cpu_us_per_call'], 1):>11} {_fmt(c['loadgen_cpu'], 2):>7}  {rss}{flag}"
            )
            rss = ""


@dataclass
class Verdict:
    target: str
    met: bool | None  # None: could not be judged (a configuration was skipped)
    detail: str

    def line(self) -> str:
        word = {True: "MET", False: "NOT MET", None: "SKIPPED"}[self.met]
        return f"  {word:<8} {self.target:<52} {self.detail}"


def _metric(summary: dict[str, Any], name: str, cell: Cell, metric: str) -> float | None:
    value = summary.get(name, {}).get("cells", {}).get(cell, {}).get(metric)
    return value if _finite(value) else None


def ratio_verdict(
    summary: dict[str, Any],
    target: str,
    cell: Cell,
    metric: str,
    unit: str,
    other: str,
    limit: float,
    at_most: bool,
) -> Verdict:
    """mcpd's metric against `other`'s: at most (or at least) `limit` times it."""
    ours = _metric(summary, "mcpd", cell, metric)
    theirs = _metric(summary, other, cell, metric)
    if ours is None or theirs is None or theirs == 0:
        missing = "mcpd" if ours is None else other
        return Verdict(target, None, f"no figure for {missing}")
    ratio = ours / theirs
    met = ratio <= limit if at_most else ratio >= limit
    detail = f"mcpd {ours:.1f} {unit} vs {other} {theirs:.1f} {unit} = {ratio:.2f}x"
    return Verdict(target, met, detail)


def matrix_verdicts(summary: dict[str, Any]) -> list[Verdict]:
    small, big = 64, 16384
    out = [
        ratio_verdict(
            summary, "conc 1, 64 B: mcpd p50 <= 1.5x relay p50", (1, small),
            "p50_us", "us", "relay", 1.5, True,
        ),
        ratio_verdict(
            summary, "conc 1, 64 B: mcpd CPU/call <= 1.5x relay's", (1, small),
            "cpu_us_per_call", "us", "relay", 1.5, True,
        ),
    ]  # fmt: skip
    for payload in (small, big):
        label = "64 B" if payload == small else "16 KiB"
        out.append(
            ratio_verdict(
                summary, f"conc 32, {label}: mcpd calls/s >= 50x fastmcp-proxy's",
                (32, payload), "calls_per_s", "calls/s", "fastmcp-proxy", 50, False,
            )
        )  # fmt: skip
        out.append(
            ratio_verdict(
                summary, f"conc 32, {label}: mcpd calls/s >= 0.5x relay's",
                (32, payload), "calls_per_s", "calls/s", "relay", 0.5, False,
            )
        )  # fmt: skip
    for conc in (1, 32):
        out.append(
            ratio_verdict(
                summary, f"16 KiB, conc {conc}: mcpd p50 <= 1.5x relay p50",
                (conc, big), "p50_us", "us", "relay", 1.5, True,
            )
        )  # fmt: skip
    return out


def scale_verdicts(scale: dict[str, Any] | None, n_tools: int) -> list[Verdict]:
    names = (
        "scale: mcpd start-up to ready < 1.5 s",
        f"scale: full paged tools/list ({n_tools} tools) < 50 ms",
        "scale: mcpd RSS < 60 MB",
    )
    if not scale or "skipped" in scale:
        why = (scale or {}).get("skipped", "not run").splitlines()[0]
        return [Verdict(name, None, why) for name in names]
    ready = scale["ready_s"]
    notify = scale.get("notify_ready_s")
    notify_text = (
        f", READY=1 at {notify:.3f} s" if notify is not None else ", READY=1 not seen by then"
    )
    listing = scale["tools_list"]
    rss_mb = scale["memory_after_list"]["hwm_kb"] / 1024
    out = [
        Verdict(names[0], ready < 1.5, f"{ready:.3f} s ({scale.get('ready_by')}){notify_text}"),
        Verdict(
            names[1],
            listing["median_ms"] < 50 and listing["tools"] == n_tools,
            f"median {listing['median_ms']:.1f} ms (first {listing['first_ms']:.1f} ms),"
            f" {listing['tools']} tools in {listing['pages']} pages",
        ),
        Verdict(names[2], rss_mb < 60, f"peak {rss_mb:.1f} MB with {n_tools} tools listed"),
    ]
    return out


def scale_lines(scale: dict[str, Any] | None) -> list[str]:
    """The scale figures that have no target: start-up detail, idle connections."""
    if not scale or "skipped" in scale:
        return []
    mem = scale["memory_after_list"]
    alone = scale.get("servers_alone_s")
    floor = f"{alone:.3f} s" if alone is not None else "did not finish"
    lines = [
        f"  start-up: ready {scale['ready_s']:.3f} s, daemon CPU to ready"
        f" {scale['daemon_cpu_to_ready_s']:.2f} s; RSS {mem['rss_kb'] / 1024:.1f} MB"
        f" (peak {mem['hwm_kb'] / 1024:.1f} MB) after listing",
        f"  floor: the same servers without mcpd answer discover and every tools/list page"
        f" in {floor}",
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
