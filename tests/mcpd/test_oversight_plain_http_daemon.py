"""A credential header a server's plain ``http://`` URL off this machine would carry in
clear is warned of in the journal of a running daemon, as ``check-config`` warns of it:
once a server at start and again at each reload, naming the server and the header,
never its value."""

from __future__ import annotations

import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemons.served import Served

TOKEN = "tok-0123456789abcdef"
WARNING = (
    "servers.remote.headers.Authorization: a credential sent over plain http to 192.0.2.1, "
    "which is not this machine"
)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # AF_UNIX paths are limited to 107 bytes; pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="mcpd-ph-") as d:
        yield Path(d)


def config(directory: Path) -> str:
    return (
        f'[daemon]\nsocket = "{directory}/mcpd.sock"\nstate_dir = "{directory}/state"\n'
        "startup_deadline = 1.0\n"
        '\n[servers.remote]\nurl = "http://192.0.2.1:9/mcp"\nconnect_timeout = 0.5\n'
        f'headers = {{ Authorization = "Bearer {TOKEN}", "X-Trace" = "on" }}\n'
        '\n[servers.local]\nurl = "http://127.0.0.1:9/mcp"\n'
        f'headers = {{ Authorization = "Bearer {TOKEN}" }}\n'
    )


def test_serve_warns_of_a_credential_header_over_plain_http_at_start_and_reload(
    short_dir: Path,
) -> None:
    served = Served(short_dir, config(short_dir))
    try:
        served.until(WARNING)
        served.until("listening on")
        served.proc.send_signal(signal.SIGHUP)
        served.until(WARNING)
        served.proc.send_signal(signal.SIGTERM)
        served.exited()
    finally:
        served.close()
    warned = [line for line in served.log if "plain http" in line]
    assert len(warned) == 2, warned
    assert all(f"[remote] plain_http_credential: {WARNING}" in line for line in warned)
    assert not any(TOKEN in line for line in served.log)
