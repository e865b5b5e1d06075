"""Whose files mcpd trusts and who else may write them: the service's user found where
only root could have made it, a refusal naming the owner, and the writers a mode or a
POSIX ACL lets in besides the owner (a group of the owner's own is the owner)."""

from __future__ import annotations

import grp
import os
import pwd
import stat
import struct
from pathlib import Path

import pytest

from mcpd.local.ownership import owners

STRANGER = 4242  # a uid with no user on this machine
_ENTRY = struct.Struct("<HHI")
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
ANY = 0xFFFFFFFF  # the id of an entry that names no one


def stat_of(mode: int, uid: int = 0, gid: int = 0) -> os.stat_result:
    return os.stat_result((mode, 1, 1, 1, uid, gid, 0, 0, 0, 0))


def acl(*entries: tuple[int, int, int]) -> bytes:
    """An access ACL as the kernel keeps it: (tag, permissions, id) entries."""
    return struct.pack("<I", 2) + b"".join(_ENTRY.pack(*e) for e in entries)


def base(*named: tuple[int, int, int], mask: int | None = 0o6) -> bytes:
    entries = [(USER_OBJ, 0o6, ANY), *named, (GROUP_OBJ, 0o4, ANY), (OTHER, 0o4, ANY)]
    if mask is not None:
        entries.append((MASK, mask, ANY))
    return acl(*sorted(entries, key=lambda e: (e[0], e[2])))  # in the kernel's order


@pytest.fixture
def no_service(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A machine where the service's directory and user are not there yet."""
    monkeypatch.setattr(owners, "SERVICE_DIR", str(tmp_path / "run" / "mcpd"))
    monkeypatch.setattr(owners, "SERVICE_USER", "mcpd-no-such-user")
    return tmp_path / "run"


# -- the service's user --


def test_without_a_service_directory_or_user_only_mcpd_and_root_are_trusted(
    no_service: Path,
) -> None:
    assert owners.service_uids() == frozenset()
    assert owners.trusted_owners() == frozenset({os.geteuid(), 0})


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory away")
def test_the_owner_of_the_service_directory_in_roots_run_is_the_service_user(
    no_service: Path,
) -> None:
    no_service.mkdir(mode=0o755)
    (no_service / "mcpd").mkdir()
    os.chown(no_service / "mcpd", STRANGER, STRANGER)
    assert owners.service_uids() == frozenset({STRANGER})
    assert STRANGER in owners.trusted_owners()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory away")
@pytest.mark.parametrize("parent_mode", [0o775, 0o757, 0o1777])
def test_a_service_directory_in_a_run_others_may_write_says_nothing_of_the_service(
    no_service: Path, parent_mode: int
) -> None:
    """Anyone who may write there could have made it, as their own."""
    no_service.mkdir()
    no_service.chmod(parent_mode)
    (no_service / "mcpd").mkdir()
    os.chown(no_service / "mcpd", STRANGER, STRANGER)
    assert owners.service_uids() == frozenset()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file away")
def test_a_file_at_the_service_directorys_name_says_nothing_of_the_service(
    no_service: Path,
) -> None:
    no_service.mkdir(mode=0o755)
    (no_service / "mcpd").write_text("")
    os.chown(no_service / "mcpd", STRANGER, STRANGER)
    assert owners.service_uids() == frozenset()


def test_the_system_user_named_mcpd_is_the_service_user(
    no_service: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nobody = pwd.getpwnam("nobody")
    monkeypatch.setattr(owners, "SERVICE_USER", "nobody")
    assert owners.service_uids() == frozenset({nobody.pw_uid})


# -- a refusal --


def test_a_refusal_names_the_owner_and_who_would_be_trusted() -> None:
    said = owners.not_trusted("/run/mcpd/token", STRANGER)
    assert said.startswith("/run/mcpd/token belongs to uid 4242 (no user name), not to ")
    if os.geteuid() == 0:
        assert said.endswith("not to root or the mcpd service user")
    else:
        assert said.endswith(f"not to you (uid {os.geteuid()}), root or the mcpd service user")


def test_a_user_is_named_by_their_name() -> None:
    assert owners.user_name(0) == "root"
    assert owners.user_name(STRANGER) == "no user name"


# -- who else may write --


def test_a_file_only_its_owner_may_write_has_no_other_writer() -> None:
    assert owners.other_writers(stat_of(stat.S_IFREG | 0o644, STRANGER, STRANGER)) is None


def test_a_file_every_user_may_write_says_so() -> None:
    assert owners.other_writers(stat_of(stat.S_IFDIR | 0o777, 0, 0)) == "every user"
    assert owners.other_writers(stat_of(stat.S_IFDIR | 0o1733, 0, 0)) == "every user"


def test_a_group_with_others_in_it_is_named() -> None:
    users = grp.getgrnam("users")
    st = stat_of(stat.S_IFDIR | 0o770, 0, users.gr_gid)
    assert owners.other_writers(st) == "the group users"
    assert owners.other_writers(stat_of(stat.S_IFDIR | 0o770, 0, STRANGER)) == (
        f"the group {STRANGER}"
    )


def test_the_owners_own_group_is_the_owner() -> None:
    root = grp.getgrgid(0)
    if root.gr_mem or any(p.pw_gid == 0 and p.pw_uid != 0 for p in pwd.getpwall()):
        pytest.skip("the root group is shared on this machine")
    assert owners.other_writers(stat_of(stat.S_IFDIR | 0o770, 0, 0)) is None


def test_a_user_an_acl_lets_write_is_named() -> None:
    st = stat_of(stat.S_IFREG | 0o660, 0, 0)
    said = owners.other_writers(st, base((USER, 0o6, STRANGER)))
    assert said == f"the user no user name (uid {STRANGER}, by its ACL)"


def test_a_group_an_acl_lets_write_is_named() -> None:
    users = grp.getgrnam("users")
    st = stat_of(stat.S_IFREG | 0o640, 0, 0)
    assert owners.other_writers(st, base((GROUP, 0o7, users.gr_gid))) == (
        "the group users (by its ACL)"
    )


def test_an_acl_entry_the_mask_takes_write_from_or_that_reads_only_lets_no_one_write() -> None:
    st = stat_of(stat.S_IFREG | 0o640, 0, 0)
    assert owners.other_writers(st, base((USER, 0o6, STRANGER), mask=0o4)) is None
    assert owners.other_writers(st, base((USER, 0o4, STRANGER))) is None
    # The owner and mcpd's own user named again are no one else.
    assert owners.other_writers(st, base((USER, 0o6, 0), (USER, 0o6, os.geteuid()))) is None
    theirs = stat_of(stat.S_IFREG | 0o640, STRANGER, STRANGER)
    assert owners.other_writers(theirs, base((USER, 0o6, STRANGER))) is None


def test_an_acl_cut_short_is_read_as_none() -> None:
    st = stat_of(stat.S_IFREG | 0o600, 0, 0)
    assert owners.other_writers(st, base((USER, 0o6, STRANGER))[:-3]) is None
    assert owners.other_writers(st, b"\x02\x00") is None


def test_a_files_acl_is_read_as_the_kernel_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("")
    assert owners.acl_of(str(path)) is None
    kept = base((USER, 0o6, STRANGER))
    try:
        os.setxattr(path, "system.posix_acl_access", kept)
    except OSError as exc:
        pytest.skip(f"no ACLs here: {exc}")
    assert owners.acl_of(str(path)) == kept
    fd = os.open(path, os.O_RDONLY)
    try:
        assert owners.acl_of(fd) == kept
    finally:
        os.close(fd)
    assert owners.other_writers(path.stat(), owners.acl_of(str(path))) is not None
    assert owners.acl_of(str(tmp_path / "missing")) is None
