"""The secrets mcpd holds, as the config gives them, and their masking: every one
found in one pass, whatever their number, and nothing but them."""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpd.config.credentials.secrets import HeldSecret
from mcpd.config.loading.load import parse_config
from mcpd.policy.redaction.masking import KnownSecrets, SecretSet, marker


def test_the_config_knows_what_came_from_variables_and_files(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("file-secret-value\n")
    key_file.chmod(0o600)
    cfg = parse_config(
        {
            "servers": {
                "gh": {
                    "url": "https://api.example.com/mcp?token=url-token-123",
                    "headers": {"Authorization": "Bearer ${GH_TOKEN}", "X-Team": "text/plain"},
                },
                "notes": {
                    "command": "notes",
                    "args": ["--api-key", "arg-secret-xyz", "--dir", "${HOME}/notes"],
                    "env": {"API_KEY": "literal-env-secret", "LOG_LEVEL": "verbose-debug"},
                },
                "db": {"command": "db", "env": {"PASSWORD": f"${{file:{key_file}}}"}},
                "off": {"command": "x", "enabled": False, "env": {"T": "${MISSING}"}},
            },
            "daemon": {"state_dir": "${STATE:-/var/tmp/default-state}"},
        },
        env={"GH_TOKEN": "gh-token-abcdef", "HOME": "/home/alice"},
    )
    held = {s.value: s.where for s in cfg.held_secrets}
    assert held == {
        "gh-token-abcdef": "servers.gh.headers.Authorization",
        "Bearer gh-token-abcdef": "servers.gh.headers.Authorization",
        "url-token-123": "servers.gh.url",
        "arg-secret-xyz": "servers.notes.args[1]",
        "literal-env-secret": "servers.notes.env.API_KEY",
        "file-secret-value": "servers.db.env.PASSWORD",
    }
    # Values are never shown by the config's own repr.
    assert "gh-token-abcdef" not in repr(cfg.held_secrets)


def test_a_variable_is_a_secret_only_where_it_is_used_as_one() -> None:
    cfg = parse_config(
        {
            "daemon": {"socket": "${RUN_DIR}/mcpd.sock"},
            "servers": {
                "files": {
                    "command": "files",
                    "args": ["--root", "${PROJECT_DIR}", "--token", "${SERVICE_TOKEN}"],
                    "env": {"ROOT": "${PROJECT_DIR}", "UPSTREAM_TOKEN": "${UPSTREAM}"},
                },
                "web": {"url": "https://example.com/mcp", "headers": {"X-Team": "${TEAM_ID}"}},
            },
        },
        env={
            "RUN_DIR": "/run/user/1000/work",
            "PROJECT_DIR": "/home/alice/project",
            "SERVICE_TOKEN": "service-key-123",
            "UPSTREAM": "upstream-value-456",
            "TEAM_ID": "team-id-789",
        },
    )
    held = {s.value for s in cfg.held_secrets}
    # A folder or a socket is masked nowhere: every path under it would be.
    assert "/run/user/1000/work" not in held and "/home/alice/project" not in held
    # Named as a secret (the variable, or the key it is given to), or sent as a header.
    assert {"service-key-123", "upstream-value-456", "team-id-789"} <= held


def test_every_secret_is_masked_with_whose_it_was() -> None:
    secrets = SecretSet(
        [
            HeldSecret("servers.a.env.TOKEN", "tok-123456"),
            HeldSecret("servers.b.headers.Authorization", "123456-bearer"),
            HeldSecret("servers.c.env.KEY", "other-key"),
        ]
    )
    text = "x tok-123456-bearer y other-keyother-key z"
    # Overlapping secrets go together, under the first one's owner.
    assert secrets.mask(text) == (
        f"x {marker('servers.a.env.TOKEN')} y {marker('servers.c.env.KEY')}"
        f"{marker('servers.c.env.KEY')} z"
    )
    assert secrets.mask("nothing here") == "nothing here"
    value = {"tok-123456": ["a other-key", 1, None, True], "n": 123456789}
    assert secrets.mask_value(value) == {
        marker("servers.a.env.TOKEN"): [f"a {marker('servers.c.env.KEY')}", 1, None, True],
        "n": 123456789,
    }
    pin = SecretSet([HeldSecret("servers.d.env.PIN", "12345678")])
    assert pin.mask_value({"pin": 12345678}) == {"pin": marker("servers.d.env.PIN")}


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text("abc", min_size=1, max_size=5), min_size=1, max_size=6),
    st.text("abcx", max_size=40),
)
def test_the_search_finds_what_a_naive_one_finds(secrets: list[str], text: str) -> None:
    found = SecretSet([HeldSecret(f"s{i}", s) for i, s in enumerate(secrets)]).find(text)
    naive = {
        (i, i + len(s))
        for s in set(secrets)
        for i in range(len(text) - len(s) + 1)
        if text.startswith(s, i)
    }
    assert {(start, end) for start, end, _ in found} == naive


def test_many_secrets_cost_one_pass() -> None:
    rng = random.Random(7)
    held = [
        HeldSecret(f"s{i}", "".join(rng.choices(string.ascii_letters, k=24))) for i in range(2000)
    ]
    secrets = SecretSet(held)
    text = "".join(rng.choices(string.ascii_letters, k=20000)) + held[1234].value
    assert secrets.mask(text).endswith(marker("s1234"))
    assert secrets.size == 2000


def test_known_secrets_follow_their_sources() -> None:
    tokens = ["oauth-access-1"]
    known = KnownSecrets()
    known.replace("config", [HeldSecret("servers.a.env.KEY", "config-secret")])
    known.watch("oauth", lambda: [HeldSecret("servers.b OAuth token", t) for t in tokens])
    assert known.mask("config-secret oauth-access-1") == (
        f"{marker('servers.a.env.KEY')} {marker('servers.b OAuth token')}"
    )
    first = known.current()
    assert known.current() is first  # unchanged: not built again
    tokens[0] = "oauth-access-2"
    assert known.mask("oauth-access-1 oauth-access-2") == (
        f"oauth-access-1 {marker('servers.b OAuth token')}"
    )
    known.replace("config", [])
    assert known.mask("config-secret") == "config-secret"


@pytest.mark.parametrize("value", ["", "short"])
def test_short_values_are_not_taken_for_secrets(value: str) -> None:
    cfg = parse_config(
        {"servers": {"a": {"command": "x", "env": {"API_KEY": "${K}"}}}}, env={"K": value}
    )
    assert cfg.held_secrets == ()
