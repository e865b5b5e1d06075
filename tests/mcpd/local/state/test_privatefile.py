"""Every file mcpd writes that holds a secret (the last known tools, the endpoint token,
an OAuth login, a secret moved aside by ``mcpd import``) and the host config files
``mcpd connect --write`` edits: a link planted at the temporary name or at the target
never sends the data elsewhere, a stale temporary file never lends its mode, and a
directory that is a link or that others can write is refused with the reason."""

from __future__ import annotations

import grp
import json
import os
import stat
import threading
from pathlib import Path

import pytest
import trio

from mcpd.cli.hosts import hostconfig as hc
from mcpd.local.state import statefile
from mcpd.local.state.endpoint_token import TokenError
from tests.support.system.acls import acl, with_acl
from tests.support.system.private_files import WRITERS, Writer, _imported_secret

VICTIM = b"someone else's file\n"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file elsewhere that a planted link points to."""
    path = tmp_path / "elsewhere" / "victim"
    path.parent.mkdir()
    path.write_bytes(VICTIM)
    path.chmod(0o644)
    return path


def temporary_name(target: Path) -> Path:
    return target.with_name(f"{target.name}.{os.getpid()}.tmp")


def private_file_with(target: Path, data: bytes) -> None:
    assert not target.is_symlink() and target.read_bytes() == data
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(os.listdir(target.parent)) == [target.name], "something was left aside"


@pytest.mark.parametrize("writer", WRITERS, ids=repr)
async def test_a_link_at_the_temporary_name_is_not_followed(
    tmp_path: Path, victim: Path, writer: Writer
) -> None:
    target = writer.place(tmp_path)
    target.parent.mkdir(parents=True, mode=0o700)
    temporary_name(target).symlink_to(victim)
    data = await writer.write(target)
    assert victim.read_bytes() == VICTIM
    private_file_with(target, data)


@pytest.mark.parametrize("writer", WRITERS, ids=repr)
async def test_a_link_at_the_target_is_replaced_not_followed(
    tmp_path: Path, victim: Path, writer: Writer
) -> None:
    target = writer.place(tmp_path)
    target.parent.mkdir(parents=True, mode=0o700)
    target.symlink_to(victim)
    data = await writer.write(target)
    assert victim.read_bytes() == VICTIM and stat.S_IMODE(victim.stat().st_mode) == 0o644
    private_file_with(target, data)


@pytest.mark.parametrize("writer", WRITERS, ids=repr)
async def test_a_stale_temporary_file_does_not_lend_its_mode(
    tmp_path: Path, writer: Writer
) -> None:
    target = writer.place(tmp_path)
    target.parent.mkdir(parents=True, mode=0o700)
    stale = temporary_name(target)
    stale.write_bytes(b"left by a writer that died")
    stale.chmod(0o644)
    data = await writer.write(target)
    private_file_with(target, data)


@pytest.mark.parametrize("writer", WRITERS, ids=repr)
async def test_a_directory_that_is_a_link_is_refused(tmp_path: Path, writer: Writer) -> None:
    target = writer.place(tmp_path)
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    target.parent.parent.mkdir(parents=True, exist_ok=True)
    target.parent.symlink_to(real)
    with pytest.raises((OSError, TokenError), match="is a symbolic link"):
        await writer.write(target)
    assert list(real.iterdir()) == []


@pytest.mark.parametrize("mode", [0o777, 0o1777])
@pytest.mark.parametrize("writer", WRITERS[:3], ids=repr)
async def test_a_directory_every_user_can_write_is_refused(
    tmp_path: Path, writer: Writer, mode: int
) -> None:
    target = writer.place(tmp_path)
    target.parent.mkdir(parents=True)
    target.parent.chmod(mode)
    advice = "chmod go-w" if mode == 0o777 else "a directory of your own"
    with pytest.raises((OSError, TokenError), match=f"every user.*{advice}"):
        await writer.write(target)
    assert list(target.parent.iterdir()) == []


def test_the_secrets_directory_of_an_import_is_made_private(tmp_path: Path) -> None:
    """It is mcpd's own: an existing one is tightened, not refused; one that belongs to
    someone else is refused."""
    target = tmp_path / "config.secrets" / "github.env.TOKEN"
    target.parent.mkdir()
    target.parent.chmod(0o777)
    data = trio.run(_imported_secret, target)
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    private_file_with(target, data)
    if os.geteuid() == 0:
        os.chown(target.parent, 65534, 65534)
        with pytest.raises(OSError, match="belongs to another user"):
            trio.run(_imported_secret, target)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a directory to a group")
async def test_a_group_may_write_only_when_it_is_the_owners_own(tmp_path: Path) -> None:
    """Many distributions give each user a group of their own and a umask that lets
    it write: that group is the user. A group with other members is not."""
    own = tmp_path / "own"
    own.mkdir()
    own.chmod(0o770)
    os.chown(own, 0, 0)  # root's own group "root", with no other member here
    if grp.getgrgid(0).gr_mem:
        pytest.skip("the root group has members on this machine")
    statefile.write_atomically(str(own / "file"), b"x")
    assert (own / "file").read_bytes() == b"x"
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o770)
    users = grp.getgrnam("users")
    os.chown(shared, 0, users.gr_gid)
    with pytest.raises(OSError, match="the group users"):
        statefile.write_atomically(str(shared / "file"), b"x")


def test_writers_in_threads_of_one_process_each_write_whole(tmp_path: Path) -> None:
    path = tmp_path / "state" / statefile.FILE_NAME
    payloads = [bytes([65 + i]) * 100_000 for i in range(4)]
    errors: list[BaseException] = []

    def write(data: bytes) -> None:
        try:
            for _ in range(25):
                statefile.write_atomically(str(path), data)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(p,)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert path.read_bytes() in payloads


# -- host config files (mcpd connect --write) --


BRIDGE = ["mcpd", "bridge"]


def test_a_host_config_in_a_directory_every_user_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    path = shared / "mcp.json"
    path.write_text("{}")
    with pytest.raises(hc.HostConfigError, match="shared by every user"):
        hc.write_host_config("cursor", path, hc.entry("cursor", bridge_argv=BRIDGE))
    assert path.read_text() == "{}" and list(shared.iterdir()) == [path]


def test_a_host_config_link_others_could_have_planted_is_not_followed(
    tmp_path: Path, victim: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    victim.write_text("{}")  # a file the host could read, so only the link is wrong
    link = shared / "mcp.json"
    link.symlink_to(victim)
    with pytest.raises(hc.HostConfigError, match="every user"):
        hc.write_host_config("cursor", link, hc.entry("cursor", bridge_argv=BRIDGE))
    assert victim.read_text() == "{}"


def test_a_host_config_keeps_its_mode_and_a_backup_keeps_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    original = b'{\r\n  "mcpServers": {}\r\n}\r\n'
    path.write_bytes(original)
    path.chmod(0o644)
    written = hc.write_host_config("cursor", path, hc.entry("cursor", bridge_argv=BRIDGE))
    assert written.backup is not None and written.backup.read_bytes() == original
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert stat.S_IMODE(written.backup.stat().st_mode) == 0o644
    assert json.loads(path.read_text())["mcpServers"]["mcpd"]["command"] == "mcpd"


def test_a_host_config_in_a_linked_folder_is_written_there(tmp_path: Path) -> None:
    """Dotfile managers link whole folders: the file inside is the user's to edit."""
    real = tmp_path / "dotfiles" / "cursor"
    real.mkdir(parents=True)
    (tmp_path / ".cursor").symlink_to(real)
    path = tmp_path / ".cursor" / "mcp.json"
    path.write_text("{}")
    written = hc.write_host_config("cursor", path, hc.entry("cursor", bridge_argv=BRIDGE))
    assert written.path == real / "mcp.json" and (tmp_path / ".cursor").is_symlink()
    assert "mcpd" in json.loads((real / "mcp.json").read_text())["mcpServers"]


def test_a_directory_an_acl_lets_another_user_write_is_not_written_to(tmp_path: Path) -> None:
    """Its mode reads 0750 or so: the ACL's named user is what lets them in."""
    folder = tmp_path / "state"
    folder.mkdir(mode=0o700)
    with_acl(folder, acl(("user", 65534, 0o7), mask=0o7))
    with pytest.raises(OSError, match="uid 65534, by its ACL"):
        statefile.write_atomically(str(folder / "file"), b"x")
    assert list(folder.iterdir()) == []
