"""mcpd's state directory is made private and refused where another user could read or
change it: one they own or may write, or one reached through a directory of theirs,
stops ``mcpd serve`` (exit 78) and ``mcpd check-config`` with the path and the reason;
one of the user's own that others may read is made 0700, whatever the umask, where all
it holds is private as mcpd makes it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.local.state.statedir import UnsafeStateDirectory, ready_state_directory
from tests.support.system.peer_user import USER, needs_root, peer_uid, shared_dir

MCPD = [sys.executable, "-m", "mcpd"]


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode_of(path: Path) -> int:
    return path.stat().st_mode & 0o7777


def test_a_missing_state_directory_is_made_private_with_what_is_missing_above_it(
    tmp_path: Path, umask_022: None
) -> None:
    state = tmp_path / "local" / "state" / "mcpd"
    ready_state_directory(str(state))
    assert mode_of(state) == 0o700
    assert mode_of(tmp_path / "local") == 0o700


def test_a_state_directory_of_ones_own_that_others_may_read_is_made_private(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o755)
    (state / "pins.json").write_text("{}")
    (state / "pins.json").chmod(0o600)  # as mcpd writes it
    (state / "homes").mkdir(mode=0o700)
    ready_state_directory(str(state))
    assert mode_of(state) == 0o700
    assert (state / "pins.json").read_text() == "{}"
    assert f"the state directory {state} could be read by other users (mode 0755)" in caplog.text


def test_a_state_directory_holding_what_others_may_read_is_left_as_it_is_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A home directory named as the state directory: what it holds for others to read
    (a web page, a group's files) is not mcpd's to take from them."""
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o755)
    (home / "public_html").mkdir(mode=0o755)
    (home / "public_html").chmod(0o755)
    ready_state_directory(str(home))
    assert mode_of(home) == 0o755
    assert f"`chmod go-rwx {home}` makes it private" in caplog.text


def test_a_state_directory_every_user_may_write_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o1777)
    with pytest.raises(UnsafeStateDirectory) as refused:
        ready_state_directory(str(state))
    assert str(refused.value).startswith(f"will not keep its state in {state}: ")
    assert "every user may add files to it (mode 1777)" in str(refused.value)
    assert refused.value.exit_code == 78
    assert mode_of(state) == 0o1777


@needs_root
def test_a_state_directory_another_user_made_first_is_refused_and_left_alone(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)
    os.chown(state, peer_uid(), peer_uid())
    with pytest.raises(UnsafeStateDirectory) as refused:
        ready_state_directory(str(state))
    assert f"{state} belongs to uid {peer_uid()} ({USER})" in str(refused.value)
    assert list(state.iterdir()) == [] and mode_of(state) == 0o777


@needs_root
def test_nothing_is_made_in_a_directory_of_another_users(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, peer_uid(), peer_uid())
    with pytest.raises(UnsafeStateDirectory) as refused:
        ready_state_directory(str(theirs / "mcpd"))
    assert f"the directory {theirs} belongs to uid {peer_uid()} ({USER})" in str(refused.value)
    assert not (theirs / "mcpd").exists()


@needs_root
def test_a_link_to_a_directory_of_another_users_is_refused(tmp_path: Path) -> None:
    # What check-config's advice about links must never lead to: the link's own
    # directory is the user's, the place it leads to is not.
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, peer_uid(), peer_uid())
    (tmp_path / "state").symlink_to(theirs)
    with pytest.raises(UnsafeStateDirectory) as refused:
        ready_state_directory(str(tmp_path / "state"))
    said = str(refused.value)
    assert f"{tmp_path / 'state'} belongs to uid {peer_uid()} ({USER})" in said
    assert said.endswith("make it yours (chown) or use a directory of your own")


# -- through the command line --


@needs_root
@pytest.mark.parametrize("command", [["serve", "--log", "stderr"], ["check-config"]])
def test_serve_and_check_config_refuse_a_state_directory_another_user_made(
    command: list[str],
) -> None:
    # As /tmp/alice-state would be, made by someone else before mcpd first ran.
    shared = shared_dir()
    try:
        state = shared / "state"
        state.mkdir(mode=0o777)
        state.chmod(0o777)
        os.chown(state, peer_uid(), peer_uid())
        config = shared / "mcpd.toml"
        config.write_text(
            f'[daemon]\nstate_dir = "{state}"\nsocket = "{shared / "mcpd.sock"}"\n'
            f'[servers.box]\ncommand = "{sys.executable}"\nargs = ["-c", "pass"]\n'
        )
        config.chmod(0o600)
        done = subprocess.run(
            [*MCPD, *command[:1], "--config", str(config), *command[1:]],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 78, done.stderr
        assert f"will not keep its state in {state}: {state} belongs to uid" in done.stderr
        assert "OK" not in done.stdout
        # Nothing of the user's went there: no home, no audit log, no pins.
        assert list(state.iterdir()) == []
        assert not (shared / "mcpd.sock").exists()
    finally:
        shutil.rmtree(shared)
