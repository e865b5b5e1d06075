"""A config with several mistakes is said a line each, as ``mcpd serve`` says it: by
``mcpd check-config``, by ``mcpd reload`` against a running daemon, and once each in
the log of the daemon that refused the reload."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.daemons.served import Served

pytestmark = pytest.mark.timeout(90)

# Both a command and a url, and an empty command: two errors, from one reading of the file.
BOTH = (
    '[servers.both]\ncommand = "python3"\nurl = "http://127.0.0.1:1/mcp"\n'
    '[servers.empty]\ncommand = ""\n'
)
FIRST = "servers.both: give exactly one of `command` (stdio) or `url` (HTTP)"
SECOND = "servers.empty.command: is empty"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # AF_UNIX paths are limited to 107 bytes; pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="mcpd-lines-") as d:
        yield Path(d)


def mcpd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpd", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_check_config_says_each_error_on_a_line_of_its_own(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(BOTH)
    out = mcpd("check-config", "--config", str(config))
    assert out.returncode == 78
    assert out.stderr.splitlines() == [
        f"mcpd: config error: {config}: {FIRST}",
        f"    | {config}: {SECOND}",
    ]


def test_connect_says_each_error_of_the_config_on_a_line_of_its_own(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    # An alias holding an escape sequence: shown escaped, never sent to the terminal.
    config.write_text(BOTH + '[servers."x\\u001b[2J"]\ncommand = "a"\nurl = "http://h/"\n')
    out = mcpd("connect", "claude-code", "--config", str(config))
    assert out.returncode == 2
    lines = out.stderr.splitlines()
    assert lines[:2] == [f"mcpd: config error: {config}: {FIRST}", f"    | {config}: {SECOND}"]
    assert len(lines) > 2 and all(line.startswith("    | ") for line in lines[2:])
    # Quoted as the file writes it: one key, not a path.
    assert "\x1b" not in out.stderr and 'servers."x\\u001b[2J"' in out.stderr


def test_a_refused_reload_is_said_a_line_an_error_by_reload_and_once_in_the_log(
    short_dir: Path,
) -> None:
    daemon = f'[daemon]\nsocket = "{short_dir}/mcpd.sock"\nstate_dir = "{short_dir}/state"\n'
    served = Served(short_dir, daemon)
    try:
        served.until("listening on")
        served.config.write_text(daemon + BOTH)
        out = mcpd("reload", "--socket", str(served.socket))
        assert out.returncode == 78
        assert out.stderr.splitlines() == [
            f"mcpd: config rejected: {served.config}: {FIRST}",
            f"    | {served.config}: {SECOND}",
        ]
        served.until("reload rejected")
        served.until(SECOND)
    finally:
        served.close()
    refused = next(i for i, line in enumerate(served.log) if "reload rejected" in line)
    assert served.log[refused].endswith(
        f"reload: reload rejected, keeping the running configuration: {served.config}: {FIRST}\n"
    ), served.log[refused]
    assert served.log[refused + 1] == f"    | {served.config}: {SECOND}\n"
