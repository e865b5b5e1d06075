"""Files that hold a secret or a decision (the endpoint token, OAuth logins, the last
known tools, the pins) are trusted only where they belong to mcpd's user, root or the
service user: another user's directory is refused before a byte is written there, and
a file another user wrote, or could have written, is refused with its owner named."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from mcpd.agents.http.tcp import guard, own_origins
from mcpd.agents.http.wire import Reject
from mcpd.local.ownership import owners
from mcpd.local.state.endpoint_token import TokenError, TokenFile, stored_token, write_token
from mcpd.local.state.oauth_store import OAuthStore, encode_login
from mcpd.local.state.statefile import FILE_NAME, read_state
from tests.support.system.peer_user import USER, needs_root, peer_uid, run_as, shared_dir
from tests.support.system.private_files import WRITERS, Writer, keeper, login, request

ROOT = Path(__file__).resolve().parents[4]

# Writes bytes (argv[2], in hex) to a file (argv[1]) as the user running it, 0600.
WRITE_AS = """
import os, sys
path, data = sys.argv[1], bytes.fromhex(sys.argv[2])
os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(fd, data)
os.close(fd)
"""

STATE = b'{"format": 1, "servers": {"notes": {"fingerprint": "x", "tools": []}}}'


@pytest.fixture
def peer_home() -> Iterator[Path]:
    """A directory of the other user's own, as a state directory in their home is."""
    base = shared_dir()
    home = base / "home"
    home.mkdir(mode=0o755)
    os.chown(home, peer_uid(), peer_uid())
    try:
        yield home
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def written_by_peer(path: Path, data: bytes) -> None:
    await run_as(peer_uid(), WRITE_AS, str(path), data.hex())
    assert path.stat().st_uid == peer_uid()


@needs_root
@pytest.mark.parametrize("writer", WRITERS[:3], ids=repr)
async def test_a_directory_of_another_user_is_not_written_to(
    peer_home: Path, writer: Writer
) -> None:
    target = writer.place(peer_home)
    await run_as(peer_uid(), f"import os; os.makedirs({str(target.parent)!r}, mode=0o755)")
    with pytest.raises((OSError, TokenError)) as info:
        await writer.write(target)
    assert f"{target.parent} belongs to uid {peer_uid()} ({USER}), not to root or the " in str(
        info.value
    )
    assert "use a directory of your own" in str(info.value)
    assert list(target.parent.iterdir()) == []


@needs_root
def test_root_rotating_gives_the_token_to_the_service_user_only(
    tmp_path: Path, peer_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = tmp_path / "run" / "mcpd"  # the unit's RuntimeDirectory=, the service's
    service.mkdir(parents=True)
    os.chown(service, peer_uid(), peer_uid())
    monkeypatch.setattr(owners, "SERVICE_DIR", str(service))
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chown(state, peer_uid(), peer_uid())
    write_token(str(state / "token"))
    st = (state / "token").stat()
    assert (st.st_uid, st.st_gid) == (peer_uid(), peer_uid())
    assert stored_token(str(state / "token"))  # root reads the service's token back
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    write_token(str(mine / "token"))
    assert (mine / "token").stat().st_uid == 0


@needs_root
async def test_a_token_another_user_wrote_is_refused(peer_home: Path) -> None:
    path = peer_home / "state" / "token"
    await written_by_peer(path, b"chosen-by-them\n")
    said = f"{path} belongs to uid {peer_uid()} ({USER}), not to root or the mcpd service user"
    with pytest.raises(TokenError, match="so mcpd does not trust what it says") as info:
        stored_token(str(path))
    assert said in str(info.value) and f"rm {path}" in str(info.value)
    # The endpoint lets nobody in on it, the token's chooser included.
    check = guard(TokenFile(str(path)).current, own_origins(frozenset({"127.0.0.1"}), 8765))
    with pytest.raises(Reject) as refused:
        check(request(Authorization="Bearer chosen-by-them"))
    assert refused.value.status == 503 and said.encode() in refused.value.body
    assert path.read_bytes() == b"chosen-by-them\n"  # and it was not "repaired" either
    # ``mcpd token`` says so too, rather than printing their token.
    config = peer_home.parent / "config.toml"
    config.write_text(f'[daemon]\nstate_dir = "{path.parent}"\n')
    done = await trio.run_process(
        [sys.executable, "-m", "mcpd", "token", "--config", str(config)],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 2 and done.stdout == b""
    assert said in done.stderr.decode()


@needs_root
async def test_a_login_another_user_wrote_is_not_used(
    peer_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = OAuthStore(str(peer_home / "state"))
    path = Path(store.path("tickets"))
    await written_by_peer(path, encode_login(login()))
    with caplog.at_level(logging.WARNING, "mcpd.tokens"):
        assert await store.load("tickets") is None
    assert f"{path} belongs to uid {peer_uid()} ({USER})" in caplog.text
    assert "`mcpd auth login tickets` replaces it" in caplog.text


@needs_root
async def test_state_and_pins_another_user_wrote_are_not_used(
    peer_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = peer_home / "state" / FILE_NAME
    await written_by_peer(state, STATE)
    with caplog.at_level(logging.WARNING):
        assert read_state(str(state)).servers == {}
    assert f"{state} belongs to uid {peer_uid()} ({USER})" in caplog.text
    pins_path = peer_home / "state" / "pins.json"
    await written_by_peer(pins_path, b'{"format": 1, "servers": {}}')
    cat, pins = keeper(pins_path)
    with trio.fail_after(10):
        await pins.load()
    assert cat.gate.review.hold_unapproved  # nothing counts as approved on their word


@pytest.mark.parametrize("mode", [0o620, 0o606, 0o666], ids=oct)
async def test_a_file_others_may_write_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "state" / "token"
    write_token(str(path), "mine")
    path.chmod(mode)
    with pytest.raises(TokenError, match=f"can be written by other users \\(mode 0{mode:o}\\)"):
        stored_token(str(path))
    store = OAuthStore(str(tmp_path / "state"))
    await store.save("tickets", login())
    os.chmod(store.path("tickets"), mode)
    assert await store.load("tickets") is None


def test_a_link_or_a_fifo_in_place_of_the_token_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    write_token(str(state / "elsewhere"), "mine")
    (state / "token").symlink_to(state / "elsewhere")
    with pytest.raises(TokenError, match="is a symbolic link"):
        stored_token(str(state / "token"))
    (state / "token").unlink()
    os.mkfifo(state / "token", 0o600)  # would hang a reader that waited on it
    with pytest.raises(TokenError, match="is not a regular file"):
        stored_token(str(state / "token"))
