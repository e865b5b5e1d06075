"""Fixtures for tests that boot a real systemd in a container (see harness.py)."""

from __future__ import annotations

import pytest

from tests.support.system import required
from tests.systemd import harness


@pytest.fixture(scope="session")
def systemd_rootfs() -> harness.Rootfs:
    """The cached Debian rootfs (built on first use, about a minute), after one probe
    boot has shown that containers can run on this machine."""
    reason = harness.skip_reason()
    if reason:
        required.impossible("real-systemd tests", required.SYSTEMD, reason)
    rootfs = harness.ensure_rootfs()
    probe = harness.Machine(rootfs).run("true", timeout=60)
    if probe.rc != 0:
        why = f"systemd-nspawn cannot boot here:\n{probe.report()}"
        required.impossible("real-systemd tests", required.SYSTEMD, why)
    return rootfs
