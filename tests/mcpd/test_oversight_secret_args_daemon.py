"""A secret mcpd holds that a server's arguments put on its command line is warned of
in the journal of a running daemon, as ``check-config`` warns of it: at start and again
at each reload, naming the server and the argument, never the value."""

from __future__ import annotations

import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemons.served import Served

KEY = "Zq8v3kP1xR7mW2nB5cY9dF4gH6jK0lQa"
WARNING = (
    "servers.notes.args[3]: a secret that a ${...} reference puts there is on the "
    "server's command line, which every local user can read"
)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # AF_UNIX paths are limited to 107 bytes; pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="mcpd-sa-") as d:
        yield Path(d)


def test_serve_warns_of_a_held_secret_in_args_at_start_and_reload(short_dir: Path) -> None:
    secret = short_dir / "key"
    secret.write_text(KEY)
    secret.chmod(0o600)
    config = (
        f'[daemon]\nsocket = "{short_dir}/mcpd.sock"\nstate_dir = "{short_dir}/state"\n'
        "startup_deadline = 5.0\n"
        f'\n[servers.notes]\ncommand = "{sys.executable}"\n'
        f'args = ["-m", "mcpd.demo.notes", "--", "${{file:{secret}}}"]\n'
    )
    served = Served(short_dir, config)
    try:
        served.until(WARNING)
        served.until("listening on")
        served.proc.send_signal(signal.SIGHUP)
        served.until(WARNING)
        served.proc.send_signal(signal.SIGTERM)
        served.exited()
    finally:
        served.close()
    warned = [line for line in served.log if "command line" in line]
    assert len(warned) == 2, warned
    assert all(f"[notes] secret_in_args: {WARNING}" in line for line in warned)
    assert not any(KEY in line for line in served.log)
