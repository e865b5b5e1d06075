"""The credential files: private, whole, and a bad one costs a login, not the daemon."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from mcpd.local.state.oauth_store import FORMAT, OAuthStore, StoredLogin, encode_login
from protocol.oauth import Secret
from tests.support.system.private_files import URL, login


async def test_a_saved_login_comes_back_whole_in_a_private_file(tmp_path: Path) -> None:
    store = OAuthStore(str(tmp_path / "state"))
    await store.save("tickets", login())
    path = Path(store.path("tickets"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [p.name for p in path.parent.iterdir()] == ["tickets.json"]  # nothing left aside
    back = await store.load("tickets")
    assert back is not None and back.current is not None
    assert back.current.tokens is not None
    assert back.current.tokens.access_token.reveal() == "at-123"
    assert back.current.tokens.refresh_token == Secret("rt-456")
    assert back.current.registration is not None
    assert back.current.registration.client_secret == Secret("cs-789")


async def test_a_loosened_file_is_made_private_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = OAuthStore(str(tmp_path))
    await store.save("tickets", login())
    os.chmod(store.path("tickets"), 0o644)
    with caplog.at_level(logging.WARNING):
        assert await store.load("tickets") is not None
    assert stat.S_IMODE(os.stat(store.path("tickets")).st_mode) == 0o600
    assert "was readable by other users; it is 0600 again" in caplog.text


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{not json", "JSON is malformed"),
        (b'{"server_url": 3}', "Expected `str`"),
        (encode_login(StoredLogin(server_url=URL, format=FORMAT + 1)), f"format {FORMAT + 1}"),
    ],
)
async def test_a_file_that_cannot_be_used_means_a_new_login(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes, why: str
) -> None:
    store = OAuthStore(str(tmp_path))
    os.makedirs(store.directory, mode=0o700)
    Path(store.path("tickets")).write_bytes(content)
    os.chmod(store.path("tickets"), 0o600)
    with caplog.at_level(logging.WARNING):
        assert await store.load("tickets") is None
    assert "a new login will be needed" in caplog.text and why in caplog.text
    assert "at-123" not in caplog.text
