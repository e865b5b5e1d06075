"""Fixtures for tests that boot a real systemd in a container (see harness.py)."""

from __future__ import annotations

import os

import pytest

from tests.systemd import harness

# CI sets this so that a machine that should run these tests fails loudly instead of
# skipping them.
REQUIRED = os.environ.get("MCPD_REQUIRE_SYSTEMD_TESTS") == "1"


@pytest.fixture(scope="session")
def systemd_rootfs() -> harness.Rootfs:
    """The cached Debian rootfs (built on first use, about a minute), after one probe
    boot has shown that containers can run on this machine."""
    reason = harness.skip_reason()
    if reason:
        if REQUIRED:
            pytest.fail(f"real-systemd tests required but impossible: {reason}")
        pytest.skip(f"real-systemd tests: {reason}")
    rootfs = harness.ensure_rootfs()
    probe = harness.Machine(rootfs).run("true", timeout=60)
    if probe.rc != 0:
        message = f"systemd-nspawn cannot boot here:\n{probe.report()}"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    return rootfs
