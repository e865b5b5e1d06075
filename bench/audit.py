"""The audit log's cost on the call path: mcpd as it runs by default (every call
recorded in calls.jsonl and logged) against the same mcpd with ``audit = false`` and
``audit_journal = false`` (configuration ``mcpd-noaudit``), cell by cell, from the
same interleaved rounds. Held to within 10%; and the same for the call path's counts
(``bench/callpath.py`` with and without ``--no-audit``), which do not move with the
machine's load as the timed cells do."""

from __future__ import annotations

from typing import Any, Final

from bench.report import Cell, Verdict, _metric, _show

OFF: Final = "mcpd-noaudit"
LIMIT: Final = 0.10
# (metric, unit, whether less is better)
FIGURES: Final = (
    ("calls_per_s", "calls/s", False),
    ("p50_us", "us", True),
    ("cpu_us_per_call", "us", True),
)


def verdicts(summary: dict[str, Any]) -> list[Verdict]:
    """Per cell and figure: audit on over audit off, within 10% of it."""
    cells: list[Cell] = sorted(summary.get("mcpd", {}).get("cells", {}))
    out = []
    for cell in cells:
        for metric, unit, lower in FIGURES:
            figure = f"conc {cell[0]}, {cell[1]} B: {metric} audit on / off"
            target = f"{'<=' if lower else '>='} {1 + LIMIT if lower else 1 - LIMIT:g}"
            on, off = _metric(summary, "mcpd", cell, metric), _metric(summary, OFF, cell, metric)
            if on is None or off is None or off == 0:
                out.append(Verdict(figure, "-", "-", None, target, None, f"no figure for {OFF}"))
                continue
            ratio = on / off
            met = ratio <= 1 + LIMIT if lower else ratio >= 1 - LIMIT
            shown = f"off {_show(off, unit)}"
            out.append(Verdict(figure, _show(on, unit), shown, ratio, target, met))
    return out


def counted_verdicts(
    audited: list[dict[str, Any]], unaudited: list[dict[str, Any]]
) -> list[Verdict]:
    """Per stdio cell counted in-process: bytecodes per call with the audit log over
    without it, within 10%."""
    off = {(r["concurrency"], r["payload"]): r for r in unaudited}
    out = []
    for row in audited:
        if row.get("path", "stdio") != "stdio":
            continue
        cell = (row["concurrency"], row["payload"])
        figure = f"conc {cell[0]}, {cell[1]} B: bytecodes per call audit on / off"
        target = f"<= {1 + LIMIT:g}"
        other = off.get(cell)
        if other is None or not other["bytecodes"]:
            out.append(Verdict(figure, "-", "-", None, target, None, "no count without it"))
            continue
        ratio = row["bytecodes"] / other["bytecodes"]
        shown = f"off {other['bytecodes']:,.0f}"
        out.append(
            Verdict(figure, f"{row['bytecodes']:,.0f}", shown, ratio, target, ratio <= 1 + LIMIT)
        )
    return out
