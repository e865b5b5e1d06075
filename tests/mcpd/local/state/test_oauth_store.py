"""The OAuth credential store on its own: a file that cannot be trusted or read costs a
login and says why without quoting a secret, a link is neither read nor written
through, and writers that cross leave one whole file."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest
import trio

from mcpd.local.state.oauth_store import FORMAT, OAuthStore, StoredLogin, encode_login
from protocol.oauth import Secret
from tests.support.system.private_files import ISSUER, URL, login

SECRETS = ("at-123", "rt-456", "cs-789")


def planted(store: OAuthStore, alias: str, content: bytes, mode: int = 0o600) -> Path:
    os.makedirs(store.directory, mode=0o700, exist_ok=True)
    path = Path(store.path(alias))
    path.write_bytes(content)
    os.chmod(path, mode)
    return path


def warnings_of(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.name == "mcpd.tokens")


def test_each_alias_has_its_file_under_the_oauth_folder(tmp_path: Path) -> None:
    store = OAuthStore(str(tmp_path))
    assert store.directory == str(tmp_path / "oauth")
    assert store.path("tickets") == str(tmp_path / "oauth" / "tickets.json")


def test_the_login_in_use_is_the_one_of_its_issuer() -> None:
    saved = login()
    assert saved.current is saved.issuers[ISSUER]
    assert StoredLogin(server_url=URL).current is None
    assert StoredLogin(server_url=URL, issuer="https://gone.example").current is None


async def test_nothing_saved_is_no_login_and_no_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "mcpd.tokens"):
        assert await OAuthStore(str(tmp_path)).load("tickets") is None
    assert warnings_of(caplog) == ""


async def test_a_file_written_without_a_format_is_taken_as_this_one(tmp_path: Path) -> None:
    store = OAuthStore(str(tmp_path))
    planted(store, "tickets", b'{"server_url": "%s"}' % URL.encode())
    back = await store.load("tickets")
    assert back is not None and back.format == FORMAT and back.current is None


async def test_a_file_written_before_tokens_kept_their_own_client_is_read(
    tmp_path: Path,
) -> None:
    store = OAuthStore(str(tmp_path))
    entry = b'{"registration": {"issuer": "i", "client_id": "c"}, "tokens": {"access_token": "a"}}'
    planted(store, "tickets", b'{"server_url": "u", "issuer": "i", "issuers": {"i": %s}}' % entry)
    back = await store.load("tickets")
    assert back is not None and back.current is not None
    assert back.current.tokens_client is None
    assert back.current.issued_to is not None and back.current.issued_to.client_id == "c"


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "Input data was truncated"),
        (encode_login(login())[:-40], "truncated"),
        (b"\x00\xff\xfe garbage", "malformed"),
        (b"[]", "Expected `object`"),
        (b"null", "Expected `object`"),
        (
            b'{"server_url": "u", "issuers": {"i": {"tokens": {"access_token": 5}}}}',
            "issuers",
        ),
        (
            b'{"server_url": "u", "issuers": {"i": {"tokens": '
            b'{"access_token": "at-123", "expires_at": "rt-456"}}}}',
            "expires_at",
        ),
        (b'{"server_url": "u", "format": 0}', "format 0, expected"),
    ],
)
async def test_a_corrupt_or_truncated_file_costs_a_login_without_quoting_a_secret(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes, why: str
) -> None:
    store = OAuthStore(str(tmp_path))
    planted(store, "tickets", content)
    with caplog.at_level(logging.WARNING, "mcpd.tokens"):
        assert await store.load("tickets") is None
    said = warnings_of(caplog)
    assert "ignoring the saved login" in said and why in said
    assert all(secret not in said for secret in SECRETS)
    # The next login replaces it.
    await store.save("tickets", login())
    assert await store.load("tickets") is not None


async def test_a_group_readable_file_is_tightened_and_still_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = OAuthStore(str(tmp_path))
    path = planted(store, "tickets", encode_login(login()), 0o640)
    with caplog.at_level(logging.WARNING, "mcpd.tokens"):
        assert await store.load("tickets") is not None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "it is 0600 again" in warnings_of(caplog)


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
async def test_a_file_others_can_write_is_not_believed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: int
) -> None:
    store = OAuthStore(str(tmp_path))
    planted(store, "tickets", encode_login(login()), mode)
    with caplog.at_level(logging.WARNING, "mcpd.tokens"):
        assert await store.load("tickets") is None
    assert "can be written by other users" in warnings_of(caplog)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away takes root")
async def test_a_file_of_another_user_is_not_believed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = OAuthStore(str(tmp_path))
    path = planted(store, "tickets", encode_login(login()))
    os.chown(path, 54321, 54321)
    with caplog.at_level(logging.WARNING, "mcpd.tokens"):
        assert await store.load("tickets") is None
    said = warnings_of(caplog)
    assert "54321" in said and "`mcpd auth login tickets` replaces it" in said


async def test_a_link_in_place_of_the_file_is_not_followed_either_way(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = OAuthStore(str(tmp_path / "state"))
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(encode_login(login()))
    os.chmod(elsewhere, 0o600)
    os.makedirs(store.directory, mode=0o700)
    os.symlink(elsewhere, store.path("tickets"))
    with caplog.at_level(logging.WARNING, "mcpd.tokens"):
        assert await store.load("tickets") is None
    assert "symbolic link" in warnings_of(caplog)
    fresh = StoredLogin(server_url="https://fresh.example/mcp")
    await store.save("tickets", fresh)
    assert not os.path.islink(store.path("tickets"))
    assert elsewhere.read_bytes() == encode_login(login())  # what the link pointed at is untouched
    back = await store.load("tickets")
    assert back is not None and back.server_url == "https://fresh.example/mcp"


async def test_a_folder_in_place_of_the_file_costs_a_login(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = OAuthStore(str(tmp_path))
    os.makedirs(store.path("tickets"), mode=0o700)
    with caplog.at_level(logging.WARNING, "mcpd.tokens"):
        assert await store.load("tickets") is None
    assert "ignoring the saved login" in warnings_of(caplog)


async def test_a_state_folder_that_is_a_file_costs_a_login(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "oauth").write_text("")
    store = OAuthStore(str(tmp_path))
    with caplog.at_level(logging.WARNING, "mcpd.tokens"):
        assert await store.load("tickets") is None
    assert "ignoring the saved login" in warnings_of(caplog)
    with pytest.raises(OSError):
        await store.save("tickets", login())


def _numbered(n: int) -> StoredLogin:
    saved = login()
    entry = saved.issuers[ISSUER]
    assert entry.tokens is not None
    entry.tokens = type(entry.tokens)(Secret(f"at-{n}" * 200), issuer=ISSUER)
    return saved


async def test_crossing_saves_leave_one_whole_file(tmp_path: Path) -> None:
    store = OAuthStore(str(tmp_path))
    other = OAuthStore(str(tmp_path))  # a second store on the same folder, its own lock
    written = {encode_login(_numbered(n)) for n in range(12)}
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            for n in range(12):
                nursery.start_soon((store if n % 2 else other).save, "tickets", _numbered(n))
    assert Path(store.path("tickets")).read_bytes() in written
    assert os.listdir(store.directory) == ["tickets.json"]  # no temporary file left


async def test_logins_of_two_servers_do_not_mix(tmp_path: Path) -> None:
    store = OAuthStore(str(tmp_path))
    await store.save("a", _numbered(1))
    await store.save("b", _numbered(2))
    for alias, n in (("a", 1), ("b", 2)):
        back = await store.load(alias)
        assert back is not None and back.current is not None and back.current.tokens is not None
        assert back.current.tokens.access_token.reveal().startswith(f"at-{n}")
