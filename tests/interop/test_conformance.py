"""The official MCP conformance suite (client mode) with mcpd's daemon as the client.

For each scenario the harness starts its mock server and runs ``conformance_driver.py``,
which starts the daemon with that server as its only upstream and acts through the
daemon's socket. Each check the harness reports is compared with what is expected of
mcpd, by check id (and name, where one id covers several checks), so a regression
names the check that broke. The driver's own summary (what mcpd answered the agent,
and what it sent over the wire) is checked too.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.hosts.peers import node_env, node_tool
from tests.support.hosts.third_party import DRIVER, MODERN, Run, unexpected

# A pytestmark in conftest.py marks nothing, so each module marks itself.
pytestmark = pytest.mark.interop


LEGACY = "2025-11-25"

# mcpd itself has no one to ask for input. When the agent did not declare elicitation
# either, the request state scenario's elicitation rounds never complete, by design:
# mcpd reports the input request to the agent as an error result and never retries
# on its own, so the checks that only a retry can satisfy fail.
NO_ELICITATION = "FAILURE"
# A run whose agent declares elicitation and answers (``conformance_driver --elicit``).
ELICIT = "+elicit"

# Per scenario (and agent), the status expected of each check: by id, or by "id/name"
# where one id covers several checks. Any check not listed (other than INFO) fails.
EXPECTED: dict[str, dict[str, str]] = {
    # Its mock answers server/discover (any unknown method) with an empty result.
    "initialize": {
        "mcp-client-initialization": "SUCCESS",
    },
    "tools_call": {
        "tool-add-numbers": "SUCCESS",
        "wire-schema-valid": "SUCCESS",
    },
    # The tool's stream ends after a priming event (id, retry: 500) and no response:
    # mcpd resumes it with GET + Last-Event-ID 500 ms later and takes the response
    # from there (the harness times the GET: 450 ms is too early).
    "sse-retry": {
        "client-sse-graceful-reconnect": "SUCCESS",
        "client-sse-retry-timing": "SUCCESS",
        "client-sse-last-event-id": "SUCCESS",
    },
    "request-metadata": {
        "sep-2575-http-client-sends-version-header": "SUCCESS",
        "sep-2575-client-populates-meta": "SUCCESS",
        "sep-2575-client-sends-client-info": "SUCCESS",
        "sep-2575-http-version-header-matches-meta": "SUCCESS",
        "sep-2575-client-retry-supported-version": "SUCCESS",
        # Skipped because mcpd declares none of these capabilities.
        "sep-2575-client-declares-roots-capability": "SKIPPED",
        "sep-2575-client-declares-sampling-capability": "SKIPPED",
        "sep-2575-client-declares-elicitation-capability": "SKIPPED",
    },
    # mcpd lists and uses a modern server's prompts and resources too: every header
    # check is exercised, except the handshake's (no initialize at 2026-07-28).
    "http-standard-headers": {
        **{
            f"sep-2243-client-includes-standard-headers/ClientMcp{kind}Header_{m}": "SUCCESS"
            for kind, methods in (
                (
                    "Method",
                    (
                        "tools_list",
                        "tools_call",
                        "resources_list",
                        "resources_templates_list",
                        "resources_read",
                        "prompts_list",
                        "prompts_get",
                    ),
                ),
                ("Name", ("tools_call", "resources_read", "prompts_get")),
            )
            for m in methods
        },
        **{
            f"sep-2243-client-includes-standard-headers/ClientMcpMethodHeader_{m}": "SKIPPED"
            for m in ("initialize", "notifications_initialized")
        },
    },
    "http-custom-headers": {
        "sep-2243-client-supports-custom-headers": "SUCCESS",
        "sep-2243-client-mirrors-designated-params": "SUCCESS",
        "sep-2243-client-encode-values": "SUCCESS",
        "sep-2243-client-base64-unsafe": "SUCCESS",
        "sep-2243-client-omit-null": "SUCCESS",
    },
    "http-invalid-tool-headers": {
        "sep-2243-client-reject-invalid-tool": "SUCCESS",
        "sep-2243-x-mcp-header-not-empty": "SUCCESS",
        "sep-2243-x-mcp-header-primitive-only": "SUCCESS",
        "sep-2243-x-mcp-header-unique": "SUCCESS",
        "sep-2243-x-mcp-header-charset": "SUCCESS",
    },
    "json-schema-ref-no-deref": {
        "sep-2106-no-network-ref-deref": "SUCCESS",
    },
    "json-schema-2020-12-preservation": {
        "json-schema-2020-12-client-tool-found": "SUCCESS",
        "json-schema-2020-12-client-echo-completed": "SUCCESS",
        "json-schema-2020-12-client-$schema-preserved": "SUCCESS",
        "json-schema-2020-12-client-$defs-preserved": "SUCCESS",
        "json-schema-2020-12-client-additionalProperties-preserved": "SUCCESS",
        "sep-2106-client-composition-keywords-preserved": "SUCCESS",
        "sep-2106-client-conditional-keywords-preserved": "SUCCESS",
        "sep-2106-client-anchor-keyword-preserved": "SUCCESS",
        "wire-schema-valid": "SUCCESS",
    },
    "sep-2322-client-request-state": {
        "sep-2322-client-parallel-isolation": "SUCCESS",
        "sep-2322-default-result-type-complete": "SUCCESS",
        # Only observable on a retry that answers the elicitation request.
        "sep-2322-client-request-state-echoed": NO_ELICITATION,
        "sep-2322-client-jsonrpc-id-different": NO_ELICITATION,
        "sep-2322-client-no-state-omitted": NO_ELICITATION,
    },
    # mcpd hands the agent input_required as it is, and its retry (answers and the
    # same requestState) goes to the server as a new request.
    "sep-2322-client-request-state" + ELICIT: {
        "sep-2322-client-parallel-isolation": "SUCCESS",
        "sep-2322-default-result-type-complete": "SUCCESS",
        "sep-2322-client-request-state-echoed": "SUCCESS",
        "sep-2322-client-jsonrpc-id-different": "SUCCESS",
        "sep-2322-client-no-state-omitted": "SUCCESS",
    },
}

RUNS = [
    ("initialize", LEGACY),
    ("tools_call", LEGACY),
    ("tools_call", MODERN),
    ("sse-retry", LEGACY),
    ("request-metadata", MODERN),
    ("http-standard-headers", MODERN),
    ("http-custom-headers", MODERN),
    ("http-invalid-tool-headers", MODERN),
    ("json-schema-ref-no-deref", MODERN),
    ("json-schema-2020-12-preservation", LEGACY),
    ("json-schema-2020-12-preservation", MODERN),
    ("sep-2322-client-request-state", MODERN),
    ("sep-2322-client-request-state" + ELICIT, MODERN),
]


def texts(summary: dict[str, Any]) -> dict[str, str]:
    return {c["tool"]: c["text"] for c in summary["calls"] if not c["isError"]}


def tools_call_answers(summary: dict[str, Any]) -> None:
    assert texts(summary) == {"add_numbers": "The sum of 5 and 3 is 8"}


def sse_retry_answers(summary: dict[str, Any]) -> None:
    assert texts(summary) == {"test_reconnection": "Reconnection test completed successfully"}
    sent = [(w["http"], w["method"]) for w in summary["wire"]]
    # The call went out once; its response came on a GET.
    assert sent.count(("POST", "tools/call")) == 1
    assert ("GET", None) in sent[sent.index(("POST", "tools/call")) :]


def invalid_tool_answers(summary: dict[str, Any]) -> None:
    # The invalid tools were never listed to the agent; mcpd says which it dropped.
    assert summary["tools"] == ["valid_tool"]
    assert len(summary["server"]["dropped_tools"]) == 11


def request_state_answers(summary: dict[str, Any]) -> None:
    """input_required is never passed off as complete; a missing resultType is complete."""
    calls = {c["tool"]: c for c in summary["calls"]}
    for tool in ("test_mrtr_echo_state", "test_mrtr_no_state"):
        result = calls[tool]
        assert result["isError"] is True, result
        assert "asked for input" in result["text"]
        wanted = result["meta"]["mcpd/inputRequired"]
        assert list(wanted) == ["confirm"]
        assert wanted["confirm"]["method"] == "elicitation/create"
    assert texts(summary) == {
        "test_mrtr_unrelated": "unrelated-ok",
        "test_mrtr_no_result_type": "no-result-type-test-ok",
    }
    assert calls["test_mrtr_no_result_type"]["resultType"] == "complete"
    # One request per call: mcpd never retried an input_required result by itself.
    sent = [w["method"] for w in summary["wire"]]
    assert sent.count("tools/call") == len(calls)


def answered_request_state(summary: dict[str, Any]) -> None:
    rounds = {c["tool"]: c["rounds"] for c in summary["calls"]}
    assert rounds == {
        "test_mrtr_unrelated": ["complete"],
        "test_mrtr_echo_state": ["input_required", "complete"],
        "test_mrtr_no_state": ["input_required", "complete"],
        "test_mrtr_no_result_type": ["complete"],
    }
    assert texts(summary) == {
        "test_mrtr_unrelated": "unrelated-ok",
        "test_mrtr_echo_state": "echo-state-ok",
        "test_mrtr_no_state": "no-state-ok",
        "test_mrtr_no_result_type": "no-result-type-test-ok",
    }


ANSWERS = {
    "tools_call": tools_call_answers,
    "sse-retry": sse_retry_answers,
    "http-invalid-tool-headers": invalid_tool_answers,
    "sep-2322-client-request-state": request_state_answers,
    "sep-2322-client-request-state" + ELICIT: answered_request_state,
}


async def run_scenario(scenario: str, version: str, out_dir: Path, *driver_args: str) -> Run:
    argv = [
        node_tool("conformance"),
        "client",
        "--command",
        " ".join([sys.executable, str(DRIVER), *driver_args]),
        "--scenario",
        scenario,
        "--spec-version",
        version,
        "-o",
        str(out_dir),
    ]
    proc = await trio.run_process(
        argv,
        env={**os.environ, **node_env()},
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    log = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    return Run(proc.returncode, out_dir, log)


@pytest.mark.parametrize(("scenario", "version"), RUNS, ids=[f"{s}@{v}" for s, v in RUNS])
async def test_conformance_scenario(scenario: str, version: str, tmp_path: Path) -> None:
    name, elicit, _ = scenario.partition(ELICIT)
    with trio.fail_after(90):
        run = await run_scenario(name, version, tmp_path, *(["--elicit"] if elicit else []))

    assert unexpected(run.checks, EXPECTED[scenario]) == {}, run.log
    failures_expected = "FAILURE" in EXPECTED[scenario].values()
    assert run.returncode == (1 if failures_expected else 0), run.log

    summary = run.summary
    assert summary["ok"] is True, summary
    server = summary["server"]
    era = "modern" if version == MODERN else "legacy"
    assert (server["state"], server["era"], server["protocol_version"]) == (
        "ready",
        era,
        version,
    )
    wire = summary["wire"]
    # Era detection: a modern probe first, whatever the server turns out to speak.
    assert wire[0]["method"] == "server/discover"
    if era == "modern":
        assert all(w["http"] == "POST" and w["version"] == MODERN for w in wire), wire
        assert all(w["session"] is None for w in wire), wire
        assert "initialize" not in [w["method"] for w in wire]
    else:
        assert [w["method"] for w in wire[1:3]] == ["initialize", "notifications/initialized"]
    check_answers = ANSWERS.get(scenario)
    if check_answers is not None:
        check_answers(summary)
