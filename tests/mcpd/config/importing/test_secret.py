"""Which imported ``env`` values and headers are secrets: by the rules mcpd judges
arguments and URLs with, or by a token's shape, on the text the host file holds
itself (references and an auth scheme word are none)."""

from __future__ import annotations

import pytest

from mcpd.config.importing.secret import looks_secret

TOKEN = "ghp_5mB2x9QvT7kLw3NcR8yZ1aHd4FjU6eP0sGiO"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        # Every way a name says password, as the rules for arguments read them.
        ("PGPASS", "hunter2"),
        ("SMTP_PASS", "mailpw1"),
        ("DB_PASS", "x1"),
        ("MYSQL_PWD", "pw123"),
        # A password or a key in a URL, whatever the variable is named.
        ("DATABASE_URI", "postgresql://app:Sup3rS3cret@db/prod"),
        ("ZAPIER_URL", "https://actions.zapier.com/mcp/sk-ak-abcdef0123456789abcdef/sse"),
        # A token by its shape alone.
        ("SETTING", TOKEN),
        ("SETTING", "a1b2c3d4e5f6a7b8c9d0e1f2a3b4"),
        # What follows the scheme word; a literal part beside a reference.
        ("Authorization", "Bearer sk-live-1"),
        ("Authorization", "Basic dXNlcjpwYXNz"),
        ("Cookie", "sid=${SID}; lang=en"),
        # "$$" is a "$" the file holds, not a reference.
        ("DB_PASSWORD", "pa$$word"),
    ],
)
def test_a_secret_is_found_by_its_name_its_content_or_its_shape(key: str, value: str) -> None:
    assert looks_secret(key, value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("LOG_LEVEL", "debug"),
        ("X-Trace", "on"),
        ("PRICE_LIMIT", "$$5"),
        ("API_KEY", ""),
        # Only references: their values come from elsewhere.
        ("API_KEY", "${MY_KEY}"),
        ("PASSWORD", "${PW:-}"),
        ("X-Api-Key", "Bearer ${API}"),
        ("Authorization", "Bearer "),
        ("DATABASE_URL", "postgres://${USER}:${PW}@db/app"),
        # A path to where a secret is, and a URL with none.
        ("GOOGLE_APPLICATION_CREDENTIALS", "${HOME}/key.json"),
        ("TOKEN_FILE", "/run/credentials/mcpd/token"),
        ("ENDPOINT", "https://api.example.com/v1/mcp?units=si"),
    ],
)
def test_a_reference_a_path_or_an_ordinary_setting_is_no_secret(key: str, value: str) -> None:
    assert not looks_secret(key, value)
