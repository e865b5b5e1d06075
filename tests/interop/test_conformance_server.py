"""The official conformance suite's server scenarios, with mcpd as the server under test.

The suite (``conformance server --url``) speaks Streamable HTTP to mcpd's own
``POST /mcp`` (reached through a loopback TCP port relayed to the socket), in the
era each run names; behind mcpd is one server that does what the scenarios expect
(``servers/conformance_server.py``, on the official SDK, since the suite's package
ships none), itself spoken to in either era. So every scenario for resources,
prompts, completion, elicitation, sampling and input_required runs in all four
pairings: agent era x server era.

Through an aggregator a few cannot pass whatever mcpd does; ``CANNOT`` lists them,
with why, and the test asserts exactly those checks fail (so a fix that makes them
pass, or a regression elsewhere, shows up).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import make_config, running
from tests.support.hosts.peers import node_env, node_tool
from tests.support.hosts.tcp_relay import tcp_relay

pytestmark = pytest.mark.interop

REFERENCE = str(Path(__file__).with_name("servers") / "conformance_server.py")
LEGACY = "2025-11-25"
MODERN = "2026-07-28"

COMMON = [
    "completion-complete",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
]
SCENARIOS = {
    LEGACY: [
        *COMMON,
        "resources-subscribe",
        "resources-unsubscribe",
        "tools-call-sampling",
        "tools-call-elicitation",
        "elicitation-sep1034-defaults",
        "elicitation-sep1330-enums",
    ],
    MODERN: [
        *COMMON,
        "sep-2164-resource-not-found",
        *(
            f"input-required-result-{name}"
            for name in (
                "basic-elicitation",
                "basic-sampling",
                "basic-list-roots",
                "request-state",
                "multiple-input-requests",
                "multi-round",
                "missing-input-response",
                "non-tool-request",
                "result-type",
                "unsupported-methods",
                "tampered-state",
                "capability-check",
                "ignore-extra-params",
                "validate-input",
            )
        ),
    ],
}

# Scenarios whose server asks the client something.
ASKING = {
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    *(s for s in SCENARIOS[MODERN] if s.startswith("input-required-result-")),
}

# (scenario, agent era, server era) -> the checks that fail, and why they must.
CANNOT: dict[tuple[str, str, str], tuple[set[str], str]] = {
    ("input-required-result-basic-elicitation", MODERN, "legacy"): (
        {"sep-2322-elicitation-incomplete"},
        "a legacy server's elicitation/create carries no key; the input_required mcpd "
        "makes of it has a key of mcpd's own, not the scenario's 'user_name'",
    ),
    ("input-required-result-ignore-extra-params", MODERN, "legacy"): (
        {"sep-2322-ignore-unexpected-params"},
        "its first call already answers 'user_name', a key a legacy server never "
        "issued (it asks with a request, which has no key), so the server asks again "
        "and mcpd hands that over as input_required instead of a complete result",
    ),
    ("input-required-result-multiple-input-requests", MODERN, "legacy"): (
        {"sep-2322-multiple-inputs-incomplete"},
        "a legacy server asks one request at a time and waits for each answer, so "
        "mcpd can hand the agent only one input request per round, not three at once",
    ),
}


def failing(checks: list[dict[str, Any]]) -> dict[str, str]:
    """Checks that are not passed (a WARNING fails the suite's run as well)."""
    return {
        c["id"]: f"{c['status']}: {c.get('errorMessage') or c.get('description', '')}"
        for c in checks
        if c["status"] not in ("SUCCESS", "INFO", "SKIPPED")
    }


async def run_scenario(url: str, scenario: str, version: str, out: Path) -> list[dict[str, Any]]:
    argv = [
        node_tool("conformance"),
        "server",
        "--url",
        url,
        "--scenario",
        scenario,
        "--spec-version",
        version,
        "-o",
        str(out),
    ]
    proc = await trio.run_process(
        argv,
        env={**os.environ, **node_env()},
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    found = sorted(out.glob("**/checks.json"))
    log = (proc.stdout + proc.stderr).decode("utf-8", "replace")[-3000:]
    assert len(found) == 1, f"{scenario}: no checks.json\n{log}"
    checks: list[dict[str, Any]] = json.loads(found[0].read_text())
    assert checks, f"{scenario}: no checks\n{log}"
    return checks


@pytest.mark.parametrize("server_era", ["modern", "legacy"])
@pytest.mark.parametrize("version", [LEGACY, MODERN])
async def test_conformance_server_scenarios_through_mcpd(
    tmp_path: Path, version: str, server_era: str
) -> None:
    # The scenarios call the reference server's names; one server means no prefix.
    # A call whose retry never comes (the scenarios that stop after one round) holds
    # its server's answer for ask_timeout: short here, and room for the calls meanwhile.
    server = {
        "command": sys.executable,
        "args": [REFERENCE, "stdio"],
        "era": server_era,
        "max_concurrency": 16,
    }
    cfg = make_config(tmp_path, {"ref": server}, ask_timeout=10.0)
    cfg = cfg.__class__(
        daemon=cfg.daemon, naming=cfg.naming.__class__(template="{tool}"), servers=cfg.servers
    )
    results: dict[str, list[dict[str, Any]]] = {}
    slots = 4
    limit = trio.CapacityLimiter(slots)
    # On stdio nothing ties a legacy server's request to a call: while another suite
    # client has a call in flight on the server (asking or not), mcpd rightly refuses
    # to guess whose the request is. A scenario whose server asks runs alone: it takes
    # every slot, after the one before it.
    turns = trio.Lock()

    async def one(url: str, scenario: str) -> None:
        if not (server_era == "legacy" and scenario in ASKING):
            async with limit:
                results[scenario] = await run_scenario(url, scenario, version, tmp_path / scenario)
            return
        async with turns:
            held = [object() for _ in range(slots)]
            for borrower in held:
                await limit.acquire_on_behalf_of(borrower)
            try:
                results[scenario] = await run_scenario(url, scenario, version, tmp_path / scenario)
            finally:
                for borrower in held:
                    limit.release_on_behalf_of(borrower)

    with trio.fail_after(300):
        async with running(cfg) as daemon, tcp_relay(daemon.socket_path) as port:
            url = f"http://127.0.0.1:{port}/mcp"
            async with trio.open_nursery() as nursery:
                for scenario in SCENARIOS[version]:
                    nursery.start_soon(one, url, scenario)
            daemon.stop()

    problems = {}
    for scenario in SCENARIOS[version]:
        bad = failing(results[scenario])
        known, _ = CANNOT.get((scenario, version, server_era), (set(), ""))
        if set(bad) != known:
            problems[scenario] = {"failing": bad, "expected to fail": sorted(known)}
    report = "\n".join(
        f"{s}: {'PASS' if not failing(results[s]) else sorted(failing(results[s]))}"
        for s in SCENARIOS[version]
    )
    print(f"\nagent {version}, server {server_era}:\n{report}")
    assert problems == {}, json.dumps(problems, indent=2)
