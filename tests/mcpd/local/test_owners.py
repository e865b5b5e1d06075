"""A file whose words mcpd acts on (its config, a secret it sends) is trusted only when
no one but mcpd's user, root or the service user could have written it: not the file,
and not any directory or symbolic link on the way to it, which would let them put
another file in its place."""

from __future__ import annotations

import grp
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.local.owners import untrusted_file
from tests.support.peer_user import needs_root, peer_uid, shared_dir


def verdict(path: Path) -> str | None:
    return untrusted_file(str(path), path.stat())


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    return home


def written(path: Path, mode: int = 0o600) -> Path:
    path.write_text("[servers]\n")
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o600, 0o644, 0o400], ids=oct)
def test_a_file_of_ones_own_in_a_directory_of_ones_own_is_trusted(home: Path, mode: int) -> None:
    assert verdict(written(home / "mcpd.toml", mode)) is None


@pytest.mark.parametrize("mode", [0o602, 0o666, 0o646], ids=oct)
def test_a_file_every_user_may_write_is_not(home: Path, mode: int) -> None:
    path = written(home / "mcpd.toml", mode)
    why = verdict(path)
    assert why is not None
    assert "every user" in why and f"{mode:04o}" in why and f"chmod go-w {path}" in why


def test_a_directory_every_user_may_write_lets_them_swap_the_file(home: Path) -> None:
    shared = home / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    why = verdict(written(shared / "mcpd.toml"))
    assert why is not None and f"the directory {shared}" in why and "every user" in why


def test_a_sticky_directory_such_as_tmp_is_fine_for_a_file_of_ones_own(home: Path) -> None:
    sticky = home / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    assert verdict(written(sticky / "mcpd.toml")) is None


def test_a_directory_far_above_the_file_counts_too(home: Path) -> None:
    deep = home / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (home / "a").chmod(0o777)  # its entry b can be renamed away and replaced
    why = verdict(written(deep / "mcpd.toml"))
    assert why is not None and f"the directory {home / 'a'} " in why


def test_the_way_through_symbolic_links_is_checked_where_they_lead(home: Path) -> None:
    real = home / "dotfiles"
    real.mkdir()
    path = written(real / "mcpd.toml")
    config = home / "config"
    config.mkdir()
    (config / "mcpd.toml").symlink_to("../dotfiles/mcpd.toml")
    assert verdict(config / "mcpd.toml") is None
    real.chmod(0o777)
    why = verdict(config / "mcpd.toml")
    assert why is not None and f"the directory {real}" in why
    assert path.exists()


def test_a_link_loop_is_refused_rather_than_followed_forever(home: Path) -> None:
    path = written(home / "mcpd.toml")
    st = path.stat()
    (home / "a").symlink_to("b")
    (home / "b").symlink_to("a")
    why = untrusted_file(str(home / "a"), st)
    assert why is not None and "too many symbolic links" in why


def test_a_file_swapped_after_it_was_opened_is_not_the_one_read(home: Path) -> None:
    path = written(home / "mcpd.toml")
    with path.open() as reading:  # held open, as the loader holds it: no inode reuse
        opened = os.fstat(reading.fileno())
        written(home / "other.toml").rename(path)
        why = untrusted_file(str(path), opened)
    assert why is not None and "replaced" in why


def test_a_relative_path_is_walked_from_the_working_directory(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written(home / "mcpd.toml")
    monkeypatch.chdir(home)
    assert untrusted_file("mcpd.toml", (home / "mcpd.toml").stat()) is None
    home.chmod(0o777)
    why = untrusted_file("./mcpd.toml", (home / "mcpd.toml").stat())
    assert why is not None and f"the directory {home}" in why


def _shared_group() -> grp.struct_group:
    """A group that is no user's own, as ``users`` or ``staff`` are."""
    for name in ("users", "staff", "daemon", "adm"):
        try:
            return grp.getgrnam(name)
        except KeyError:
            continue
    pytest.skip("no shared group on this machine")


@needs_root
def test_a_file_a_shared_group_may_write_is_not_but_ones_own_group_is(home: Path) -> None:
    group = _shared_group()
    path = written(home / "mcpd.toml", 0o660)
    assert verdict(path) is None  # root's own group, of which root is the only member
    os.chown(path, -1, group.gr_gid)
    why = verdict(path)
    assert why is not None and f"the group {group.gr_name}" in why


@pytest.fixture
def peers_dir() -> Iterator[Path]:
    base = shared_dir()
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@needs_root
def test_a_file_another_user_owns_is_not_whatever_its_mode(peers_dir: Path) -> None:
    path = written(peers_dir / "mcpd.toml", 0o644)
    os.chown(path, peer_uid(), peer_uid())
    why = verdict(path)
    assert why is not None and f"belongs to uid {peer_uid()}" in why


@needs_root
def test_a_directory_another_user_owns_is_not(peers_dir: Path) -> None:
    theirs = peers_dir / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, peer_uid(), peer_uid())
    why = verdict(written(theirs / "mcpd.toml"))
    assert why is not None and f"the directory {theirs} belongs to uid {peer_uid()}" in why


@needs_root
def test_a_link_another_user_left_in_a_sticky_directory_is_not_followed(
    peers_dir: Path, home: Path
) -> None:
    """In /tmp anyone may make a link with the name a config is looked for under, and
    point it at a file of theirs or at one of yours they want read as a config."""
    sticky = peers_dir / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    mine = written(home / "mcpd.toml")
    link = sticky / "mcpd.toml"
    link.symlink_to(mine)
    os.chown(link, peer_uid(), peer_uid(), follow_symlinks=False)
    why = untrusted_file(str(link), mine.stat())
    assert why is not None and f"the symbolic link {link} belongs to uid {peer_uid()}" in why


def test_an_absolute_path_is_checked_from_a_working_directory_that_is_gone(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = written(home / "mcpd.toml")
    gone = home / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert verdict(path) is None
