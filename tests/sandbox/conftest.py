"""What every sandbox test needs first: a machine that can run a server in a sandbox,
else a skip, or a failure where MCPD_REQUIRE_SANDBOX_TESTS=1 (see
tests/support/system/bubblewrap.py)."""

from __future__ import annotations

import pytest

from tests.support.system import bubblewrap


@pytest.fixture(autouse=True)
def _sandbox_works() -> None:
    bubblewrap.require()
