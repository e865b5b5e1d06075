"""``[servers.X.auth]``: what it accepts, and the key path each mistake is named by."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpd.config.loading.load import load, parse_config
from mcpd.config.tables.model import ConfigError
from tests.support.oauth.rsa_parts import PARTS, pkcs1_pem

ROOT = Path(__file__).resolve().parents[4]

URL = "https://tickets.example.com/mcp"
# A throwaway P-256 key (PKCS#8), made for these tests only.
KEY = """-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgZc+YCeOqCy6BIUwp
8PaeEgiB0qceEmUsYnEvXKXD1xOhRANCAAS0oL9qybfzshwF4H6JIvFhAJz27mz2
SxPRpZnjOSJo60Xo8O6Qt4Vf0a8S1zz7vBjwsw094lH7kajzWbcnWKny
-----END PRIVATE KEY-----"""


def server(**auth: Any) -> dict[str, Any]:
    return {"servers": {"tickets": {"url": URL, "auth": auth}}}


def error_of(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(data, env={})
    return str(info.value)


def test_an_oauth_table_with_every_key() -> None:
    config = parse_config(
        server(
            client_id="mcpd-desktop",
            client_secret="s3cret-value",
            issuer="https://auth.example.com",
            scopes=["tickets:read", "offline_access"],
            redirect_port=33418,
            token_endpoint_auth_method="client_secret_post",
        ),
        env={},
    )
    auth = config.servers["tickets"].auth
    assert auth is not None and auth.type == "oauth" and auth.redirect_port == 33418
    # Printing the config (errors, debugging) never shows the secret.
    assert "s3cret-value" not in repr(config)
    assert "client_secret='***'" in repr(auth)


def test_client_credentials_with_a_key_from_a_file(tmp_path: Path) -> None:
    key = tmp_path / "key.pem"
    key.write_text(KEY)
    os.chmod(key, 0o600)
    config = parse_config(
        server(type="client_credentials", client_id="robot", private_key=f"${{file:{key}}}"),
        env={},
    )
    auth = config.servers["tickets"].auth
    assert auth is not None and auth.private_key == KEY
    assert "PRIVATE KEY" not in repr(config)


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        (
            {"type": "password"},
            "servers.tickets.auth.type: Invalid enum value: a string of 8 characters",
        ),
        ({"client_sercet": "x"}, "servers.tickets.auth.client_sercet: unknown key"),
        ({"type": "client_credentials"}, "servers.tickets.auth.client_id: is needed"),
        (
            {"type": "client_credentials", "client_id": "robot"},
            "servers.tickets.auth: client_credentials needs client_secret or private_key",
        ),
        ({"client_secret": "x"}, "servers.tickets.auth.client_secret: needs client_id"),
        ({"client_id": " "}, "servers.tickets.auth.client_id: is empty"),
        (
            {"client_metadata_url": "http://example.com/client.json"},
            "servers.tickets.auth.client_metadata_url: must be an https:// URL",
        ),
        ({"issuer": "auth.example.com"}, "servers.tickets.auth.issuer: must be an http(s) URL"),
        ({"scopes": ["read write"]}, "servers.tickets.auth.scopes[0]: must be one scope token"),
        ({"redirect_port": 70000}, "servers.tickets.auth.redirect_port: must be a port number"),
        (
            {"client_id": "c", "private_key": "not a key"},
            "servers.tickets.auth.private_key: the key is neither PEM nor a JWK",
        ),
        (
            {"client_id": "c", "token_endpoint_auth_method": "private_key_jwt"},
            "servers.tickets.auth.token_endpoint_auth_method: private_key_jwt needs private_key",
        ),
    ],
)
def test_mistakes_name_their_key(auth: dict[str, Any], message: str) -> None:
    assert error_of(server(**auth)).startswith(message)


def test_auth_is_for_http_servers_and_replaces_a_static_header() -> None:
    stdio = {"servers": {"notes": {"command": "notes-server", "auth": {}}}}
    assert error_of(stdio) == "servers.notes.auth: only applies to HTTP servers (with `url`)"
    both = {"servers": {"t": {"url": URL, "headers": {"Authorization": "Bearer x"}, "auth": {}}}}
    assert error_of(both).startswith("servers.t.headers.Authorization: cannot be combined")


def test_a_secret_file_anyone_can_read_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret-value\n")
    os.chmod(secret, 0o644)
    path = tmp_path / "config.toml"
    path.write_text(
        f'[servers.t]\nurl = "{URL}"\n[servers.t.auth]\nclient_id = "c"\n'
        f'client_secret = "${{file:{secret}}}"\n'
    )
    reason = load(path, env={}).servers["t"].unresolved
    assert reason is not None and reason.startswith("servers.t.auth.client_secret: ")
    assert "s3cret-value" not in reason
    os.chmod(secret, 0o600)
    auth = load(path, env={}).servers["t"].auth
    assert auth is not None and auth.client_secret == "s3cret-value"


def key_file(tmp_path: Path, text: str) -> Path:
    key = tmp_path / "key.pem"
    key.write_text(text)
    os.chmod(key, 0o600)
    return key


def check_config(tmp_path: Path, key: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "mcpd.toml"
    path.write_text(
        f'[servers.t]\nurl = "{URL}"\n[servers.t.auth]\ntype = "client_credentials"\n'
        f'client_id = "robot"\nissuer = "https://auth.example.com"\n'
        f'private_key = "${{file:{key}}}"\n'
    )
    return subprocess.run(
        [sys.executable, "-m", "mcpd", "check-config", "--config", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT)},
        timeout=60,
    )


def test_check_config_refuses_an_rsa_key_whose_parts_do_not_match_naming_its_file(
    tmp_path: Path,
) -> None:
    broken = {**PARTS, "dp": PARTS["dp"] + 1}
    key = key_file(tmp_path, pkcs1_pem(broken))
    proc = check_config(tmp_path, key)
    assert proc.returncode == 78
    assert proc.stderr.endswith(
        "servers.t.auth.private_key: the RSA key is inconsistent: its CRT exponents dp and "
        f"dq do not match e (read from {str(key)!r})\n"
    )
    assert not any(str(v)[:12] in proc.stderr for v in broken.values() if v > 10**12)


def test_check_config_takes_the_key_openssl_ecparam_genkey_writes(tmp_path: Path) -> None:
    key = tmp_path / "key.pem"
    made = ["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-out", str(key)]
    subprocess.run(made, check=True, capture_output=True)
    os.chmod(key, 0o600)
    assert key.read_text().startswith("-----BEGIN EC PARAMETERS-----")
    proc = check_config(tmp_path, key)
    assert proc.returncode == 0, proc.stderr
    assert "1 server(s)" in proc.stdout
