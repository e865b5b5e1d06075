"""The demo servers' command line: what a person typing a bad ``--http`` sees."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("listen", ["127.0.0.1:²", "127.0.0.1:٣", "127.0.0.1:70000", "8080"])
def test_a_bad_http_address_is_a_usage_error_not_a_traceback(listen: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "mcpd.demo.notes", "--http", listen],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 2, run.stderr
    assert "--http wants HOST:PORT, e.g. 127.0.0.1:0" in run.stderr
    assert "Traceback" not in run.stderr
