"""The sandbox tests' first check (tests/support/system/bubblewrap.py), on a machine
faked through the probe's remembered answer: where a sandbox cannot run, a test skips
with the reason, and fails instead under MCPD_REQUIRE_SANDBOX_TESTS=1, so that a machine
that should run them cannot pass by skipping them all."""

from __future__ import annotations

import pytest

from tests.support.system import bubblewrap
from transports.stdio.sandbox import host
from transports.stdio.sandbox.machine import Machine

WORKS = Machine(bwrap="/usr/bin/bwrap", namespaces=None, network=None)
NO_BWRAP = Machine(bwrap=None, namespaces="bwrap not found", network="bwrap not found")
NO_NAMESPACES = Machine(
    bwrap="/usr/bin/bwrap",
    namespaces="bwrap: No permissions to create new namespace",
    network="bwrap: No permissions to create new namespace",
)
NO_NETWORK = Machine(
    bwrap="/usr/bin/bwrap", namespaces=None, network="bwrap: loopback: Failed RTM_NEWADDR"
)
CANNOT = [
    pytest.param(NO_BWRAP, "bubblewrap (bwrap) is not installed", id="no-bwrap"),
    pytest.param(
        NO_NAMESPACES, "namespaces are not available here: bwrap: No permissions", id="no-userns"
    ),
    pytest.param(
        NO_NETWORK, "a network namespace is not available here: bwrap: loopback", id="no-netns"
    ),
]


@pytest.fixture(autouse=True)
def _not_required(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a developer's machine, whatever the run that tests this was told."""
    monkeypatch.delenv("MCPD_REQUIRE_SANDBOX_TESTS", raising=False)


def outcome() -> str:
    """What the check made of the test that called it; a skip or a failure caught here,
    so that neither passes for the other in this module's own results."""
    try:
        bubblewrap.require()
    except pytest.skip.Exception as skipped:
        return f"skipped: {skipped}"
    except pytest.fail.Exception as failed:
        return f"failed: {failed}"
    return "went on"


@pytest.mark.parametrize(("found", "why"), CANNOT)
def test_a_machine_that_cannot_run_a_sandbox_skips_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, found: Machine, why: str
) -> None:
    monkeypatch.setattr(host, "_machine", [found])
    assert outcome().startswith(f"skipped: sandbox tests: {why}")


@pytest.mark.parametrize(("found", "why"), CANNOT)
def test_where_sandbox_tests_are_required_a_machine_that_cannot_run_them_fails(
    monkeypatch: pytest.MonkeyPatch, found: Machine, why: str
) -> None:
    monkeypatch.setattr(host, "_machine", [found])
    monkeypatch.setenv("MCPD_REQUIRE_SANDBOX_TESTS", "1")
    assert outcome().startswith(f"failed: sandbox tests required but impossible: {why}")


@pytest.mark.parametrize("value", ["0", "", "yes"])
def test_only_a_1_makes_the_sandbox_tests_required(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setattr(host, "_machine", [NO_BWRAP])
    monkeypatch.setenv("MCPD_REQUIRE_SANDBOX_TESTS", value)
    assert outcome().startswith("skipped: sandbox tests: bubblewrap (bwrap) is not installed")


@pytest.mark.parametrize("required", ["1", None])
def test_a_machine_that_runs_a_sandbox_lets_the_test_go_on(
    monkeypatch: pytest.MonkeyPatch, required: str | None
) -> None:
    monkeypatch.setattr(host, "_machine", [WORKS])
    if required is not None:
        monkeypatch.setenv("MCPD_REQUIRE_SANDBOX_TESTS", required)
    assert outcome() == "went on"
