"""The bench judges the audit log's cost: a full run interleaves mcpd with and without
it, and says per cell and figure whether audit on stays within 10% of audit off."""

from __future__ import annotations

from typing import Any

import pytest

from bench import audit, callpath, run


def test_a_full_run_interleaves_mcpd_with_and_without_its_audit_log() -> None:
    configs = run.parse_args([]).configs
    assert "mcpd" in configs
    assert audit.OFF in configs
    assert run.parse_args(["--configs", f"mcpd,{audit.OFF}"]).configs == ["mcpd", audit.OFF]


def _summary(on: dict[str, float], off: dict[str, float]) -> dict[str, Any]:
    return {"mcpd": {"cells": {(32, 64): on}}, audit.OFF: {"cells": {(32, 64): off}}}


def test_each_figure_of_each_cell_is_met_or_not_met() -> None:
    off = {"calls_per_s": 1000.0, "p50_us": 100.0, "cpu_us_per_call": 50.0}
    within = {"calls_per_s": 950.0, "p50_us": 109.0, "cpu_us_per_call": 54.0}
    lines = [v.line() for v in audit.verdicts(_summary(within, off))]
    assert len(lines) == 3
    assert all(line.endswith(" MET") for line in lines), lines

    over = {"calls_per_s": 850.0, "p50_us": 112.0, "cpu_us_per_call": 56.0}
    lines = [v.line() for v in audit.verdicts(_summary(over, off))]
    assert all(line.endswith("NOT MET") for line in lines), lines
    assert "conc 32, 64 B: cpu_us_per_call audit on / off" in lines[2]


def test_a_run_without_the_unaudited_mcpd_says_so() -> None:
    summary = {"mcpd": {"cells": {(1, 64): {"calls_per_s": 1.0}}}}
    verdicts = audit.verdicts(summary)
    assert verdicts and all(v.met is None for v in verdicts)
    assert "no figure for mcpd-noaudit" in verdicts[0].line()


def test_the_call_count_includes_the_audit_writers_work(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The records are written and logged in a worker thread: a count of the event
    # loop's thread alone would miss most of what the audit log costs.
    args = ["--cells", "4:64", "--calls", "8", "--by-function"]
    assert callpath.main(args) == 0
    out = capsys.readouterr().out
    assert "mcpd/audit/log.py:_write" in out
    assert "mcpd/audit/journal.py:" in out  # each call's log line
    assert callpath.main([*args, "--no-audit"]) == 0
    assert "mcpd/audit/log.py:_write" not in capsys.readouterr().out


def _row(conc: int, payload: int, bytecodes: float, path: str = "stdio") -> dict[str, Any]:
    return {"concurrency": conc, "payload": payload, "bytecodes": bytecodes, "path": path}


def test_the_counted_rows_are_judged_cell_by_cell_against_those_without_the_audit() -> None:
    audited = [_row(1, 64, 2100), _row(32, 64, 1700), _row(1, 64, 5000, "http")]
    unaudited = [_row(1, 64, 2000, "stdio, no audit"), _row(32, 64, 1500, "stdio, no audit")]
    verdicts = audit.counted_verdicts(audited, unaudited)
    assert [(v.figure[:13], v.met) for v in verdicts] == [
        ("conc 1, 64 B:", True),  # 1.05
        ("conc 32, 64 B", False),  # 1.13
    ]
    assert "2,100" in verdicts[0].line() and "off 2,000" in verdicts[0].line()
    missing = audit.counted_verdicts([_row(1, 16384, 10)], unaudited)
    assert missing[0].met is None and "no count without it" in missing[0].line()
