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


def test_a_second_demo_on_a_taken_socket_says_how_to_run_beside_it(tmp_path: Path) -> None:
    """``make demo`` twice: the second is refused, told to give it a socket of its own,
    with no line of its servers that reads as if someone had stopped the demo."""
    sock = tmp_path / "mcpd.sock"
    argv = [sys.executable, "-m", "mcpd", "serve", "--demo", "--socket", str(sock)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen([*argv, "--log", "stderr"], stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert first.stderr is not None
        for line in first.stderr:
            if f"listening on {sock}" in line:
                break
        second = subprocess.run(
            [*argv, "--log", "stderr"], capture_output=True, text=True, timeout=60, env=env
        )
    finally:
        first.terminate()
        first.wait(timeout=30)
    assert second.returncode == 78, second.stderr
    assert f"something already listens on {sock}" in second.stderr
    assert "give it a socket of its own with --socket PATH, or MCPD_SOCKET" in second.stderr
    assert "stopping on" not in second.stderr, second.stderr
