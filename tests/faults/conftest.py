"""The fault suite's summary: one row per case, printed at the end of the run and written
to ``tests/faults/results.md`` (ignored by git) so the figures can be quoted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.daemons.fault_harness import RESULTS, CaseResult

RESULTS_FILE = Path(__file__).with_name("results.md")

COLUMNS = (
    ("group", "group"),
    ("case", "case"),
    ("sent", "requests sent"),
    ("answered", "answered"),
    ("lost", "lost"),
    ("healthy", "steady calls ok/failed"),
    ("rss", "RSS at start MiB"),
    ("peak", "peak RSS MiB"),
    ("growth", "growth MiB"),
    ("fds", "fds before/after"),
    ("tasks", "tasks before/after"),
    ("children", "children before/after"),
    ("log", "log lines"),
    ("seconds", "s"),
    ("note", "note"),
)


def _cells(r: CaseResult) -> dict[str, str]:
    return {
        "group": r.group,
        "case": r.case,
        "sent": str(r.sent),
        "answered": str(r.answered),
        "lost": str(r.lost),
        "healthy": f"{r.healthy_ok}/{r.healthy_failed}",
        "rss": f"{r.rss_start_mib:.1f}",
        "peak": f"{r.peak_rss_mib:.1f}",
        "growth": f"{r.growth_mib:+.1f}",
        "fds": f"{r.fds_before}/{r.fds_after}",
        "tasks": f"{r.tasks_before}/{r.tasks_after}",
        "children": f"{r.children_before}/{r.children_after}",
        "log": str(r.log_lines),
        "seconds": f"{r.seconds:.1f}",
        "note": r.note,
    }


def table(results: list[CaseResult]) -> str:
    head = "| " + " | ".join(title for _, title in COLUMNS) + " |"
    rule = "|" + "|".join("---" for _ in COLUMNS) + "|"
    rows = []
    for r in results:
        cells = _cells(r)
        rows.append("| " + " | ".join(cells[key] for key, _ in COLUMNS) + " |")
    total_sent = sum(r.sent for r in results)
    total_lost = sum(r.lost for r in results)
    foot = f"\n{len(results)} cases, {total_sent} requests, {total_lost} lost.\n"
    return "\n".join([head, rule, *rows]) + "\n" + foot


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not RESULTS:
        return
    text = table(RESULTS)
    RESULTS_FILE.write_text("# Fault suite results\n\n" + text)
    terminalreporter.section("fault cases")
    terminalreporter.write(text)
    terminalreporter.write_line(f"(written to {RESULTS_FILE})")
