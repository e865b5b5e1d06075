"""The endpoint's bearer token file on its own: what a token looks like, what counts as
no token yet, files that cannot be read, and the daemon's view of it following every
rotation."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mcpd.local.state import endpoint_token
from mcpd.local.state.endpoint_token import (
    FILE_NAME,
    TokenError,
    TokenFile,
    new_token,
    read_token,
    renew_exposed,
    stored_token,
    token_path,
    write_token,
)


def private(path: Path, content: bytes) -> Path:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_bytes(content)
    os.chmod(path, 0o600)
    return path


def test_the_token_lives_in_the_state_directory() -> None:
    assert token_path("/var/lib/mcpd") == f"/var/lib/mcpd/{FILE_NAME}"


def test_new_tokens_are_url_safe_and_not_repeated() -> None:
    tokens = {new_token() for _ in range(50)}
    assert len(tokens) == 50
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert all(len(t) == 43 and set(t) <= alphabet for t in tokens)


def test_a_written_token_is_one_private_line(tmp_path: Path) -> None:
    path = tmp_path / "state" / "token"
    assert write_token(str(path), "given-token") == "given-token"
    assert path.read_bytes() == b"given-token\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    made = write_token(str(path), "")  # nothing given: a new random one
    assert len(made) == 43 and path.read_bytes() == made.encode() + b"\n"


@pytest.mark.parametrize("content", [b"", b"\n", b"  \n\t\n"])
def test_an_empty_file_is_no_token_yet(tmp_path: Path, content: bytes) -> None:
    path = private(tmp_path / "token", content)
    assert stored_token(str(path)) == ""
    with pytest.raises(TokenError, match=r"no token in .* yet"):
        read_token(str(path), create=False)
    made = read_token(str(path))
    assert len(made) == 43 and stored_token(str(path)) == made


def test_surrounding_whitespace_is_not_part_of_the_token(tmp_path: Path) -> None:
    path = private(tmp_path / "token", b"  tok-1 \r\n")
    assert stored_token(str(path)) == "tok-1"


def test_a_token_that_is_not_ascii_is_refused_without_being_replaced(tmp_path: Path) -> None:
    path = private(tmp_path / "token", "tökén\n".encode())
    with pytest.raises(TokenError, match="cannot read the token"):
        read_token(str(path))
    assert path.read_bytes() == "tökén\n".encode()


def test_a_directory_in_place_of_the_token_is_refused_and_costs_no_descriptor(
    tmp_path: Path,
) -> None:
    # The daemon reads the token at each request: a refusal must not keep a descriptor.
    (tmp_path / "token").mkdir(mode=0o700)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        with pytest.raises(TokenError, match="not a regular file"):
            stored_token(str(tmp_path / "token"))
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_token_cannot_be_written_where_a_file_stands_for_the_folder(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("")
    with pytest.raises(TokenError, match="cannot write the token to"):
        write_token(str(tmp_path / "state" / "token"))


def test_the_daemon_view_follows_rotations_and_creates_a_missing_token(tmp_path: Path) -> None:
    path = tmp_path / "state" / "token"
    watched = TokenFile(str(path))
    first = watched.current()
    assert first and stored_token(str(path)) == first
    assert watched.current() == first
    for _ in range(3):
        rotated = write_token(str(path))
        assert watched.current() == rotated
    path.unlink()
    again = watched.current()
    assert again not in ("", rotated) and stored_token(str(path)) == again


def test_a_rotation_while_the_token_is_read_is_not_missed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The file is replaced after the daemon read it but before it noted which file it
    # read: the old token must stop working at the next request all the same.
    path = str(tmp_path / "token")
    write_token(path, "old-token")
    real_read = endpoint_token.read_token

    def read_then_rotated(where: str, *, create: bool = True) -> str:
        token = real_read(where, create=create)
        write_token(where, "new-token")
        return token

    watched = TokenFile(path)
    monkeypatch.setattr(endpoint_token, "read_token", read_then_rotated)
    assert watched.current() == "old-token"
    monkeypatch.setattr(endpoint_token, "read_token", real_read)
    assert watched.current() == "new-token"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_token_others_can_read_is_replaced_by_a_private_one(tmp_path: Path, mode: int) -> None:
    path = private(tmp_path / "state" / "token", b"known-to-others\n")
    os.chmod(path, mode)
    why = renew_exposed(str(path))
    assert why is not None and str(path) in why and f"mode {mode:04o}" in why
    assert "replaced it with a new one" in why
    token = stored_token(str(path))
    assert token not in ("", "known-to-others") and len(token) == 43
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_private_token_or_none_is_left_as_it_is(tmp_path: Path) -> None:
    path = private(tmp_path / "state" / "token", b"ours\n")
    assert renew_exposed(str(path)) is None
    assert stored_token(str(path)) == "ours"
    assert renew_exposed(str(tmp_path / "state" / "none")) is None
    assert not (tmp_path / "state" / "none").exists()
