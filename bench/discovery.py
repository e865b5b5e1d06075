"""For ``bench.run``: the tool-search relevance check (with its target, precision@3 >=
0.8) and request latency through each way an agent reaches mcpd (no target: the
socket's line protocol is the reference, the HTTP paths are reported beside it)."""

from __future__ import annotations

import subprocess
from typing import Any

from bench.endpoint import render as endpoint_render
from bench.endpoint import run_endpoint
from bench.relevance import TOP_K, run_relevance
from bench.relevance import render as relevance_render
from bench.report import Verdict

TARGET = 0.8


def relevance_run(mcpd: list[str] | None, quick: bool) -> dict[str, Any]:
    print("\ntool search relevance: real peers and the demo servers behind one mcpd")
    try:
        return run_relevance(mcpd, speed=not quick)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"  SKIPPED: {exc}")
        return {"skipped": str(exc)}


def relevance_verdict(result: dict[str, Any] | None) -> Verdict:
    figure = f"tool search: precision@{TOP_K} over the relevance queries"
    target = f">= {TARGET:g}"
    if not result or "skipped" in result:
        why = (result or {}).get("skipped", "relevance check not run").splitlines()[0]
        return Verdict(figure, "-", "-", None, target, None, why)
    value = result["precision_at_3"]
    return Verdict(
        f"{figure} ({result['queries']})",
        f"{value:.3f}",
        "-",
        None,
        target,
        value >= TARGET,
        numbers=(value, None, ""),
    )


def relevance_lines(result: dict[str, Any] | None) -> list[str]:
    if not result or "skipped" in result:
        return []
    return relevance_render(result).splitlines()


def endpoint_run(mcpd: list[str] | None, quick: bool) -> dict[str, Any]:
    print("\nrequest latency by path: line protocol, POST /mcp on the socket, on TCP")
    try:
        return run_endpoint(mcpd, calls=500 if quick else 3000)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"  SKIPPED: {exc}")
        return {"skipped": str(exc)}


def endpoint_lines(result: dict[str, Any] | None) -> list[str]:
    if not result or "skipped" in result:
        return []
    return endpoint_render(result)
