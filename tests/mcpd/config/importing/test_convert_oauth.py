"""``mcpd import`` keeps the OAuth client settings other hosts store per server."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from mcpd.config.importing.convert import import_text
from mcpd.config.importing.write import to_toml
from mcpd.config.loading.load import load, parse_config

SECRET = "cs_9f8e7d6c5b4a39281706f5e4d3c2b1a0"


def imported(doc: dict[str, Any]) -> tuple[dict[str, Any], str]:
    result = import_text(json.dumps(doc), "/home/ada/.mcp.json")
    text = to_toml(result)
    return tomllib.loads(text), text


def test_claude_code_oauth_becomes_an_auth_table() -> None:
    data, text = imported(
        {
            "mcpServers": {
                "tickets": {
                    "type": "http",
                    "url": "https://tickets.example.com/mcp",
                    "oauth": {
                        "clientId": "mcpd-desktop",
                        "callbackPort": 8976,
                        "scopes": "tickets:read tickets:write",
                        "authServerMetadataUrl": "https://auth.example.com/.well-known/x",
                    },
                }
            }
        }
    )
    assert data["servers"]["tickets"]["auth"] == {
        "client_id": "mcpd-desktop",
        "redirect_port": 8976,
        "scopes": ["tickets:read", "tickets:write"],
    }
    assert "authServerMetadataUrl: not an authorization server's well-known metadata" in text
    config = parse_config(data, env={})
    auth = config.servers["tickets"].auth
    assert auth is not None and auth.redirect_port == 8976


def test_gemini_and_cursor_secrets_are_not_copied() -> None:
    data, text = imported(
        {
            "mcpServers": {
                "docs": {
                    "url": "https://docs.example.com/mcp",
                    "oauth": {
                        "enabled": True,
                        "clientId": "gem",
                        "clientSecret": SECRET,
                        "redirectUri": "http://localhost:7777/oauth/callback",
                        "scopes": ["docs.read"],
                        "tokenUrl": "https://auth.example.com/token",
                    },
                },
                "crm": {
                    "url": "https://crm.example.com/mcp",
                    "auth": {"CLIENT_ID": "cur", "CLIENT_SECRET": "${env:CRM_SECRET}"},
                },
            }
        }
    )
    assert SECRET not in text
    docs = data["servers"]["docs"]["auth"]
    assert docs["client_secret"] == "${DOCS_CLIENT_SECRET}"
    assert docs["redirect_port"] == 7777 and docs["scopes"] == ["docs.read"]
    assert "DOCS_CLIENT_SECRET  (servers.docs.auth.client_secret)" in text
    # A reference is kept as one: it was never a secret in the file.
    assert data["servers"]["crm"]["auth"] == {"client_id": "cur", "client_secret": "${CRM_SECRET}"}
    config = parse_config(data, env={"DOCS_CLIENT_SECRET": SECRET, "CRM_SECRET": "x"})
    auth = config.servers["docs"].auth
    assert auth is not None and auth.client_secret == SECRET


def test_a_client_secret_keeps_the_authorization_server_it_belongs_to() -> None:
    # Without it, whichever authorization server the MCP server names would be sent
    # the secret.
    data, text = imported(
        {
            "mcpServers": {
                "tickets": {
                    "httpUrl": "https://tickets.example.com/mcp",
                    "oauth": {
                        "clientId": "ccid",
                        "clientSecret": SECRET,
                        "tokenUrl": "https://auth.example.com/token",
                        "issuer": "https://auth.example.com",
                    },
                },
                "wiki": {
                    "type": "http",
                    "url": "https://wiki.example.com/mcp",
                    "oauth": {
                        "clientId": "w",
                        "clientSecret": SECRET,
                        "authServerMetadataUrl": (
                            "https://id.example.com/.well-known/oauth-authorization-server/wiki"
                        ),
                    },
                },
            }
        }
    )
    assert data["servers"]["tickets"]["auth"]["issuer"] == "https://auth.example.com"
    assert data["servers"]["wiki"]["auth"]["issuer"] == "https://id.example.com/wiki"
    assert "a client secret with no issuer" not in text
    env = {"TICKETS_CLIENT_SECRET": SECRET, "WIKI_CLIENT_SECRET": SECRET}
    auth = parse_config(data, env=env).servers["tickets"].auth
    assert auth is not None and auth.issuer == "https://auth.example.com"


def test_what_cannot_be_kept_is_said() -> None:
    data, text = imported(
        {
            "mcpServers": {
                "off": {"url": "https://a.example.com/mcp", "oauth": {"enabled": False}},
                "local": {"command": "notes", "oauth": {"clientId": "x"}},
                "odd": {
                    "url": "https://b.example.com/mcp",
                    "oauth": {"clientSecret": "s", "callbackPort": "https://x.example.com/"},
                },
            }
        }
    )
    for alias in ("off", "local", "odd"):
        assert "auth" not in data["servers"][alias]
    assert "mcpServers.off.oauth: OAuth is turned off there; not imported" in text
    assert "mcpServers.local.oauth: OAuth is for HTTP servers; not imported" in text
    assert "callbackPort: 'https://x.example.com/' is not a loopback port" in text
    assert "mcpServers.odd.oauth: a client secret without a client id; not imported" in text


def test_import_to_a_file_moves_the_client_secret_out_of_the_toml(tmp_path: Path) -> None:
    source = tmp_path / "settings.json"
    source.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "docs": {
                        "url": "https://docs.example.com/mcp",
                        "oauth": {"clientId": "gem", "clientSecret": SECRET, "callbackPort": 7777},
                    }
                }
            }
        )
    )
    config = tmp_path / "config.toml"
    run = [sys.executable, "-m", "mcpd"]
    made = subprocess.run([*run, "import", str(source), "-o", str(config)], capture_output=True)
    assert made.returncode == 0, made.stderr
    assert SECRET not in config.read_text()
    checked = subprocess.run([*run, "check-config", "--config", str(config)], capture_output=True)
    assert checked.returncode == 0, checked.stderr
    assert b"http, oauth" in checked.stdout
    auth = load(config, env={}).servers["docs"].auth
    assert auth is not None and auth.client_secret == SECRET and auth.redirect_port == 7777
    (moved,) = (tmp_path / "config.secrets").iterdir()
    assert stat.S_IMODE(moved.stat().st_mode) == 0o600
