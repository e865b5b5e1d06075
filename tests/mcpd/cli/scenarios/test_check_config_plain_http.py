"""``mcpd check-config`` on credentials a plain ``http://`` URL would carry across the
network in clear: OAuth there is refused, a credential header is warned of, and
loopback (where nothing leaves the machine) is neither."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MCPD = [sys.executable, "-m", "mcpd"]
SECRET = "cs-0123456789abcdef"


def check_config(tmp_path: Path, servers: str) -> subprocess.CompletedProcess[str]:
    secret = tmp_path / "secret"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    config = tmp_path / "config.toml"
    config.write_text(servers.replace("SECRET", f"${{file:{secret}}}"))
    return subprocess.run(
        [*MCPD, "check-config", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_oauth_to_a_plain_http_server_off_this_machine_is_a_config_error(
    tmp_path: Path,
) -> None:
    out = check_config(
        tmp_path,
        '[servers.plain]\nurl = "http://[fd00::2]:18421/mcp"\n'
        '[servers.plain.auth]\ntype = "client_credentials"\nclient_id = "c"\n'
        'client_secret = "SECRET"\nissuer = "https://auth.example.com"\n',
    )
    assert out.returncode != 0
    assert "servers.plain.url: is plain http to fd00::2, not this machine" in out.stderr
    assert "OAuth needs https there" in out.stderr
    assert SECRET not in out.stdout + out.stderr


def test_an_issuer_over_plain_http_off_this_machine_is_a_config_error(tmp_path: Path) -> None:
    out = check_config(
        tmp_path,
        '[servers.t]\nurl = "https://mcp.example.com/mcp"\n'
        '[servers.t.auth]\nclient_id = "c"\nclient_secret = "SECRET"\n'
        'issuer = "http://auth.example.com"\n',
    )
    assert out.returncode != 0
    assert "servers.t.auth.issuer: is plain http to auth.example.com" in out.stderr


def test_a_credential_header_over_plain_http_off_this_machine_is_warned_of(
    tmp_path: Path,
) -> None:
    out = check_config(
        tmp_path,
        '[servers.remote]\nurl = "http://mcp.example.com/mcp"\n'
        '[servers.remote.headers]\nAuthorization = "Bearer SECRET"\n'
        '[servers.local]\nurl = "http://127.0.0.1:8000/mcp"\n'
        '[servers.local.headers]\nAuthorization = "Bearer SECRET"\n'
        '[servers.local_oauth]\nurl = "http://localhost:8001/mcp"\n'
        '[servers.local_oauth.auth]\ntype = "client_credentials"\nclient_id = "c"\n'
        'client_secret = "SECRET"\nissuer = "http://127.0.0.1:8001"\n',
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [
        "warning: servers.remote.headers.Authorization: a credential sent over plain http "
        "to mcp.example.com, which is not this machine: whoever can watch the network on "
        "the way can read it and use it; give servers.remote.url as https:// if the "
        "server has it"
    ]
    assert SECRET not in out.stdout + out.stderr
