"""What a test does on a machine where it cannot run: it skips, saying why, unless the
run was told that tests of its kind must run here (as `make test` run as root tells of the
sandbox's and the real systemd's), where it fails instead: a machine that should
run them cannot pass by skipping them all."""

from __future__ import annotations

import os
from typing import Final, NoReturn

import pytest

# Set to 1 where the tests of each kind must run.
SANDBOX: Final = "MCPD_REQUIRE_SANDBOX_TESTS"
SYSTEMD: Final = "MCPD_REQUIRE_SYSTEMD_TESTS"


def impossible(kind: str, variable: str, why: str) -> NoReturn:
    """Skips the calling test, of ``kind``, which cannot run here (``why``); fails it
    where the environment's ``variable`` is 1."""
    if os.environ.get(variable) == "1":
        pytest.fail(f"{kind} required but impossible: {why}")
    pytest.skip(f"{kind}: {why}")
