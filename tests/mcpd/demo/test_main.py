"""The demo servers' command line: what a person typing a bad ``--http`` sees."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


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


def test_mcpd_serve_demo_prints_its_http_servers_lines_as_it_prints_its_own(
    tmp_path: Path,
) -> None:
    sock = tmp_path / "mcpd.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpd", "serve", "--demo", "--socket", str(sock), "--log", "stderr"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    lines = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if f"listening on {sock}" in line:
                break
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert any(
        re.search(r" tickets listening on http://127\.0\.0\.1:[0-9]+/mcp\Z", x) for x in lines
    )
    stamp = r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} INFO     \S"
    assert all(re.match(stamp, line) for line in lines), lines
