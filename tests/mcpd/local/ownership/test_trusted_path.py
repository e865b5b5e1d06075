"""A file whose words mcpd acts on (its config, a secret it sends, a CA bundle) is
trusted only when no one but mcpd's user or root could have written it, by its mode or
its ACL: not the file, and not any directory or symbolic link on the way to it, which
would let them put another file in its place."""

from __future__ import annotations

import grp
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.local.ownership import owners
from mcpd.local.ownership.trusted_path import untrusted_file, untrusted_way
from tests.support.system.acls import acl, with_acl
from tests.support.system.peer_user import USER, needs_root, peer_uid, shared_dir


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


def test_a_user_an_acl_lets_write_is_another_writer_the_mode_does_not_show(home: Path) -> None:
    """With an ACL the mode's group bits are its mask: a file of one's own group that
    a named user may write reads as 0664, as a user-private-group umask makes it."""
    path = written(home / "mcpd.toml", 0o644)
    with_acl(path, acl(("user", 65534, 0o6)))
    why = verdict(path)
    assert why is not None and "the user" in why and "uid 65534" in why and "ACL" in why


def test_an_acl_whose_mask_withholds_writing_lets_no_one_write(home: Path) -> None:
    path = written(home / "mcpd.toml", 0o644)
    with_acl(path, acl(("user", 65534, 0o6), mask=0o4))
    assert verdict(path) is None


def test_a_directory_an_acl_lets_a_group_write_is_not_trusted_on_the_way(home: Path) -> None:
    group = _shared_group()
    folder = home / "project"
    folder.mkdir()
    with_acl(folder, acl(("group", group.gr_gid, 0o7), mask=0o7))
    why = verdict(written(folder / "mcpd.toml"))
    assert why is not None and f"the directory {folder}" in why
    assert f"the group {group.gr_name}" in why


def test_a_shared_directory_as_the_place_itself_is_named_so_not_to_be_made_private(
    home: Path,
) -> None:
    sticky = home / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    why = verdict(sticky)
    assert why is not None and "is shared: every user may add files to it" in why
    assert "chmod" not in why


@needs_root
def test_the_service_user_is_not_trusted_with_what_runs(
    peers_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mcpd service user runs servers nobody here wrote: a config it could write
    must not decide what root runs, though root reads the files it keeps."""
    monkeypatch.setattr(owners, "service_uids", lambda: frozenset({peer_uid()}))
    assert peer_uid() in owners.trusted_owners()
    path = written(peers_dir / "mcpd.toml", 0o644)
    os.chown(path, peer_uid(), peer_uid())
    why = verdict(path)
    assert why is not None and f"belongs to uid {peer_uid()}" in why and "not to root" in why


@needs_root
def test_a_group_another_user_has_as_their_own_is_no_private_group(peers_dir: Path) -> None:
    """A user made with the group of another as theirs (``useradd -g``) is not among
    its members, and may write what that group may."""
    path = written(peers_dir / "mcpd.toml", 0o664)
    uid = peer_uid()
    gid = grp.getgrnam(USER).gr_gid
    os.chown(path, uid, gid)
    assert owners.other_writers(path.stat()) is None  # the peer's own group, alone
    sharer = "mcpd-test-sharer"
    subprocess.run(["useradd", "--system", "--no-create-home", "-g", str(gid), sharer], check=True)
    try:
        assert owners.other_writers(path.stat()) == f"the group {USER}"
    finally:
        subprocess.run(["userdel", sharer], check=True)


@needs_root
def test_root_s_directory_that_only_mcpds_own_group_may_write_is_trusted(
    peers_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``install -d -o root -g mcpd -m 0770 /etc/mcpd``: its group is mcpd's user's own
    (named after it, no other member), so root and mcpd alone write there; likewise an
    ACL that names mcpd's own user."""
    folder = peers_dir / "etc"
    folder.mkdir()
    folder.chmod(0o770)
    os.chown(folder, 0, grp.getgrnam(USER).gr_gid)
    assert owners.other_writers(folder.stat()) == f"the group {USER}"  # to root, others
    path = written(peers_dir / "mcpd.toml", 0o644)
    with_acl(path, acl(("user", peer_uid(), 0o6)))
    assert owners.other_writers(path.stat(), owners.acl_of(str(path))) is not None
    monkeypatch.setattr(os, "geteuid", peer_uid)  # as mcpd running as that user sees them
    assert owners.other_writers(folder.stat()) is None
    assert owners.other_writers(path.stat(), owners.acl_of(str(path))) is None


def test_a_place_not_made_yet_is_judged_by_the_way_to_it_as_far_as_it_goes(home: Path) -> None:
    assert untrusted_way(str(home / "state" / "mcpd")) is None
    shared = home / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    why = untrusted_way(str(shared / "state" / "mcpd"))
    assert why is not None and f"the directory {shared} can be written by every user" in why
    # A sticky directory on the way (as /tmp) is fine: only its owner moves an entry.
    shared.chmod(0o1777)
    assert untrusted_way(str(shared / "state")) is None
