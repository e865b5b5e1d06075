"""What a test that cannot run here does (tests/support/system/required.py): a skip
saying why, and a failure instead where the run was told that tests of its kind must
run, each kind by its own variable."""

from __future__ import annotations

import pytest

from tests.support.system import required


def outcome(variable: str) -> str:
    """What ``impossible`` made of the test; a skip or a failure caught here, so that
    neither passes for the other in this module's own results."""
    try:
        required.impossible("real-systemd tests", variable, "no systemd-nspawn")
    except pytest.skip.Exception as skipped:
        return f"skipped: {skipped}"
    except pytest.fail.Exception as failed:
        return f"failed: {failed}"
    return "went on"


@pytest.fixture(autouse=True)
def _none_required(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a developer's machine, whatever the run that tests this was told."""
    for variable in (required.SANDBOX, required.SYSTEMD):
        monkeypatch.delenv(variable, raising=False)


def test_a_test_that_cannot_run_skips_saying_why() -> None:
    assert outcome(required.SYSTEMD) == "skipped: real-systemd tests: no systemd-nspawn"


def test_where_its_kind_is_required_it_fails_saying_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(required.SYSTEMD, "1")
    said = "failed: real-systemd tests required but impossible: no systemd-nspawn"
    assert outcome(required.SYSTEMD) == said


def test_another_kinds_requirement_leaves_it_a_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(required.SANDBOX, "1")
    assert outcome(required.SYSTEMD).startswith("skipped: ")


@pytest.mark.parametrize("value", ["0", "", "yes"])
def test_only_a_1_requires(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(required.SYSTEMD, value)
    assert outcome(required.SYSTEMD).startswith("skipped: ")
