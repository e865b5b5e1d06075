"""``${file:PATH}`` secrets: where a relative path is looked up, which files are refused
(and that the refusal says how to fix it, never what the file holds), and what of the
file's text is the secret."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcpd.config.credentials.secrets import HeldSecret, SecretError, read_secret

UNIT = {"INVOCATION_ID": "0123abcd"}


def write(path: Path, data: bytes, mode: int = 0o600) -> str:
    path.write_bytes(data)
    os.chmod(path, mode)
    return str(path)


@pytest.mark.parametrize(
    ("data", "secret"),
    [
        (b"s3cret", "s3cret"),
        (b"s3cret\n", "s3cret"),
        (b"s3cret\r\n", "s3cret"),
        (b"s3cret\n\n", "s3cret\n"),
        (b" spaced \n", " spaced "),
        (b"", ""),
        ("caf\u00e9\n".encode(), "caf\u00e9"),
    ],
)
def test_the_secret_is_the_text_without_one_line_ending(
    tmp_path: Path, data: bytes, secret: str
) -> None:
    assert read_secret(write(tmp_path / "s", data), {}) == secret


def test_a_relative_path_is_read_from_the_credentials_directory(tmp_path: Path) -> None:
    write(tmp_path / "token", b"from-systemd\n")
    assert read_secret("token", {"CREDENTIALS_DIRECTORY": str(tmp_path)}) == "from-systemd"


def test_a_relative_path_without_a_credentials_directory_says_what_to_do() -> None:
    with pytest.raises(SecretError) as info:
        read_secret("token", {})
    assert str(info.value) == (
        "'token' is relative and $CREDENTIALS_DIRECTORY is not set "
        "(give an absolute path, or use systemd's LoadCredential=)"
    )


def test_under_systemd_a_missing_credential_says_a_reload_is_not_enough(tmp_path: Path) -> None:
    env = {"CREDENTIALS_DIRECTORY": str(tmp_path), **UNIT}
    with pytest.raises(SecretError) as info:
        read_secret("token", env)
    message = str(info.value)
    assert message.startswith(f"secret file {str(tmp_path / 'token')!r} does not exist; ")
    assert "at the next `systemctl restart mcpd`, not at a reload" in message
    with pytest.raises(SecretError) as info:
        read_secret("token", {"NOTIFY_SOCKET": "/run/systemd/notify"})
    assert "systemctl restart" in str(info.value)


def test_a_credential_missing_from_the_credentials_directory_says_it_takes_a_restart(
    tmp_path: Path,
) -> None:
    with pytest.raises(SecretError) as info:
        read_secret("token", {"CREDENTIALS_DIRECTORY": str(tmp_path)})
    assert str(info.value) == (
        f"secret file {str(tmp_path / 'token')!r} does not exist; the credentials "
        "directory is the one mcpd was started with: a credential added since (systemd's "
        "LoadCredential=) is there only once the service is restarted "
        "(`systemctl restart mcpd`), not at a reload"
    )


def test_an_absolute_path_that_is_missing_is_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    with pytest.raises(SecretError, match="does not exist") as info:
        read_secret(missing, {})
    assert repr(missing) in str(info.value)


def test_an_empty_path_is_refused() -> None:
    with pytest.raises(SecretError, match=r"needs a path"):
        read_secret("", {})


def test_a_file_every_user_can_read_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = write(tmp_path / "s", b"leaked-already\n", 0o644)
    with pytest.raises(SecretError) as info:
        read_secret(path, {})
    message = str(info.value)
    assert "is readable by every user" in message
    assert f"chmod o-r {path}" in message
    assert "leaked-already" not in message
    os.chmod(path, 0o640)  # the group's read bit is the owner's business
    assert read_secret(path, {}) == "leaked-already"


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SecretError, match="is a directory"):
        read_secret(str(tmp_path), {})


def test_a_device_is_not_a_regular_file() -> None:
    with pytest.raises(SecretError, match="'/dev/null' is not a regular file"):
        read_secret("/dev/null", {})


def test_a_file_that_is_not_utf8_is_refused_without_its_content(tmp_path: Path) -> None:
    path = write(tmp_path / "s", b"pass\xff\xfeword")
    with pytest.raises(SecretError) as info:
        read_secret(path, {})
    assert str(info.value) == f"secret file {path!r} is not UTF-8 text"


def test_a_held_secret_never_shows_its_value() -> None:
    held = HeldSecret("servers.s.headers.Authorization", "Bearer abcdef")
    assert "abcdef" not in repr(held)
    assert "servers.s.headers.Authorization" in repr(held)


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    # Nothing ever writes to it: opening it to read would wait for a writer for ever.
    fifo = tmp_path / "token"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(SecretError, match="is not a regular file"):
        read_secret(str(fifo), {})


def test_a_secret_file_another_user_may_write_is_refused(tmp_path: Path) -> None:
    """Not readable by them, but writable: they could put their own token there and
    see, in their account, what mcpd's servers do with it."""
    path = write(tmp_path / "token", b"ghp_mine\n")
    os.chmod(path, 0o602)
    with pytest.raises(SecretError) as info:
        read_secret(path, {})
    assert "secret file not trusted" in str(info.value) and "every user" in str(info.value)
    assert "ghp_mine" not in str(info.value)
