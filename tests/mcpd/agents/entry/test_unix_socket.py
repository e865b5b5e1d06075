"""The agents' socket file on its own: the path to it is checked one name at a time
(directories and links only this user or root can change, none writable by others
unless sticky), missing directories are made, a live socket is never stolen and a
stale one is replaced, the socket has its mode from the start, and it is removed on
the way out only if it is still ours."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
from pathlib import Path

import pytest
import trio
import trio.testing

from mcpd.agents.entry import unix_socket
from mcpd.agents.entry.unix_socket import (
    SocketFile,
    UnsafeDirectory,
    UnusableSocketFile,
    bind_unix,
    safe_directory,
)
from mcpd.config.checks.strings import MAX_SOCKET_PATH
from mcpd.starting.cannot_start import DaemonError

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user")
OTHER = 54_321


async def open_unix_listener(path: str, mode: int) -> tuple[trio.SocketListener, SocketFile]:
    bound = await trio.to_thread.run_sync(bind_unix, path, mode)
    return bound.listener(), bound.file


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


# -- the directory --


def test_missing_directories_are_made_the_last_one_with_the_mode_asked(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "run"
    assert safe_directory(str(target), 0o700) == str(target)
    assert (mode_of(tmp_path / "a"), mode_of(target)) == (0o755, 0o700)


def test_a_relative_path_is_taken_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert safe_directory("run/./x/..", 0o700) == str(tmp_path / "run")


def test_a_directory_others_may_write_is_refused_unless_sticky(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UnsafeDirectory) as info:
        safe_directory(str(shared / "run"), 0o700)
    assert str(info.value) == (
        f"a directory above the socket {shared} is writable by others (mode 0777): anyone "
        f"could put a socket of their own in mcpd's place; chmod go-w {shared} or choose "
        "another socket path"
    )
    assert not (shared / "run").exists()
    shared.chmod(0o1777)  # as /tmp: only an entry's owner may remove or rename it
    assert safe_directory(str(shared / "run"), 0o700) == str(shared / "run")


def test_the_socket_directory_itself_is_named_as_such(tmp_path: Path) -> None:
    group_writable = tmp_path / "run"
    group_writable.mkdir()
    group_writable.chmod(0o770)
    with pytest.raises(UnsafeDirectory, match=r"^the socket directory .* \(mode 0770\)"):
        safe_directory(str(group_writable), 0o700)


@needs_root
def test_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, OTHER, OTHER)
    with pytest.raises(UnsafeDirectory) as info:
        safe_directory(str(theirs), 0o700)
    assert str(info.value).startswith(f"the socket directory {theirs} belongs to uid {OTHER} (")
    assert "not to root" in str(info.value)


@needs_root
def test_a_link_of_another_user_is_refused_whatever_it_points_to(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(mine)
    os.lchown(link, OTHER, OTHER)
    with pytest.raises(UnsafeDirectory, match=f"^the symbolic link {link} belongs to uid"):
        safe_directory(str(link), 0o700)


def test_links_of_this_user_are_followed_relative_or_absolute(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "rel").symlink_to("real")
    (tmp_path / "abs").symlink_to(real)
    (tmp_path / "chain").symlink_to("rel")
    for name in ("rel", "abs", "chain"):
        assert safe_directory(str(tmp_path / name), 0o700) == str(real)


def test_a_loop_of_links_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(UnsafeDirectory, match="goes through too many symbolic links"):
        safe_directory(str(tmp_path / "a"), 0o700)


def test_a_file_on_the_way_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(UnsafeDirectory, match=f"^{tmp_path / 'file'} is not a directory$"):
        safe_directory(str(tmp_path / "file" / "run"), 0o700)


# -- the socket --


async def test_the_socket_has_its_mode_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "run" / "mcpd.sock"
    listener, bound = await open_unix_listener(str(path), 0o660)
    try:
        assert stat.S_ISSOCK(path.lstat().st_mode) and mode_of(path) == 0o660
        assert mode_of(path.parent) == 0o755  # others are let in: they must reach it
        assert [p.name for p in path.parent.iterdir()] == ["mcpd.sock"]
    finally:
        bound.remove()
        await listener.aclose()
    assert not path.exists()
    private = tmp_path / "private" / "mcpd.sock"
    listener, bound = await open_unix_listener(str(private), 0o600)
    bound.remove()
    await listener.aclose()
    assert mode_of(private.parent) == 0o700


async def test_a_path_as_long_as_a_unix_socket_holds_is_served(tmp_path: Path) -> None:
    # The longest path a client can connect to; its temporary name is longer still.
    room = 107 - len(str(tmp_path)) - len("/mcpd.sock") - 1
    assert room > 0, "the test's directory leaves no room"
    path = tmp_path / ("d" * room) / "mcpd.sock"
    assert len(os.fsencode(str(path))) == 107
    listener, bound = await open_unix_listener(str(path), 0o600)
    try:
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(path))
            async with await listener.accept():
                pass
        assert mode_of(path) == 0o600
        assert [p.name for p in path.parent.iterdir()] == ["mcpd.sock"]
    finally:
        bound.remove()
        await listener.aclose()


async def test_a_long_file_name_in_a_short_directory_is_served() -> None:
    # As long as a path can be for its temporary name beside it: through /proc the
    # same name would be longer still.
    directory = tempfile.mkdtemp(prefix="u", dir="/tmp")
    size = MAX_SOCKET_PATH - len(f"..{os.getpid()}")
    path = os.path.join(directory, "s" * (size - len(directory) - 1))
    assert len(os.fsencode(path)) == size
    try:
        listener, bound = await open_unix_listener(path, 0o600)
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(path)
            async with await listener.accept():
                pass
        bound.remove()
        await listener.aclose()
    finally:
        shutil.rmtree(directory)


def test_where_proc_is_not_the_temporary_name_is_bound_beside_the_path() -> None:
    unopened = 1 << 20  # no such descriptor: as if /proc were not mounted
    assert unix_socket._bind_address("/tmp/s", "/tmp", unopened, ".s.7") == "/tmp/.s.7"
    opened = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)
    try:
        through = unix_socket._bind_address("/tmp/s", "/tmp", opened, ".s.7")
    finally:
        os.close(opened)
    assert through == f"/proc/self/fd/{opened}/.s.7"


def test_a_temporary_name_no_address_can_hold_is_refused_naming_it() -> None:
    tmp = "." + "n" * 95 + ".7"
    with pytest.raises(DaemonError, match=f"its temporary name '{tmp}' is too long"):
        unix_socket._bind_address("/r/" + tmp[1:-2], "/r", 1 << 20, tmp)


async def test_a_live_socket_is_never_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "mcpd.sock"
    first, bound = await open_unix_listener(str(path), 0o600)
    try:
        with trio.fail_after(30), pytest.raises(DaemonError, match="something already listens on"):
            await open_unix_listener(str(path), 0o600)
        assert path.exists()
    finally:
        bound.remove()
        await first.aclose()


async def test_a_socket_whose_listener_does_not_answer_in_time_is_not_taken_over(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcpd.sock"
    busy = socket.socket(socket.AF_UNIX)
    busy.bind(str(path))
    busy.listen(0)
    waiting = socket.socket(socket.AF_UNIX)
    waiting.connect(str(path))  # its one place in the queue, never accepted
    file = os.stat(path).st_ino
    try:
        with trio.fail_after(30):
            with pytest.raises(DaemonError, match="does not answer; not replacing it"):
                await open_unix_listener(str(path), 0o600)
        assert os.stat(path).st_ino == file  # still the busy listener's
    finally:
        waiting.close()
        busy.close()


async def test_a_stale_socket_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "mcpd.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens
    with trio.fail_after(30):
        listener, bound = await open_unix_listener(str(path), 0o600)
    bound.remove()
    await listener.aclose()


@needs_root
async def test_a_stale_socket_of_another_users_is_left_to_them(tmp_path: Path) -> None:
    path = tmp_path / "mcpd.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()
    os.lchown(path, OTHER, OTHER)
    with pytest.raises(UnusableSocketFile) as info:
        await open_unix_listener(str(path), 0o600)
    assert str(info.value).startswith(
        f"the socket file {path} belongs to uid {OTHER} (no user name), not to root (no one "
        "listens on it, mode "
    )
    assert "mcpd does not remove another user's file" in str(info.value)
    assert info.value.exit_code == 78
    assert path.lstat().st_uid == OTHER


async def test_a_file_that_is_not_a_socket_is_not_replaced(tmp_path: Path) -> None:
    path = tmp_path / "mcpd.sock"
    path.write_text("keep me")
    with pytest.raises(DaemonError, match="exists and is not a socket; not replacing it"):
        await open_unix_listener(str(path), 0o600)
    assert path.read_text() == "keep me"


async def test_a_directory_is_no_socket_path(tmp_path: Path) -> None:
    with pytest.raises(DaemonError, match="names a directory, not a socket"):
        await open_unix_listener(str(tmp_path) + "/", 0o600)


# A filesystem such as ext4 gives a new file the inode number just freed: the same
# number must not make it ours.
async def test_a_socket_that_replaced_ours_is_left_where_it_is(tmp_path: Path) -> None:
    path = tmp_path / "mcpd.sock"
    listener, bound = await open_unix_listener(str(path), 0o600)
    await listener.aclose()
    path.unlink()
    newer = socket.socket(socket.AF_UNIX)
    newer.bind(str(path))  # say, mcpd.socket's, bound by systemd meanwhile
    try:
        bound.remove()
        bound.remove()  # once is all it does
        assert stat.S_ISSOCK(path.lstat().st_mode)
    finally:
        newer.close()


@needs_root
@pytest.mark.parametrize("kind", ["file", "directory"])
async def test_another_users_file_at_the_temporary_name_is_left_and_named(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "mcpd.sock"
    beside = tmp_path / f".mcpd.sock.{os.getpid()}"
    if kind == "file":
        beside.write_text("theirs")
    else:
        beside.mkdir()
    os.chown(beside, OTHER, OTHER)
    with pytest.raises(UnusableSocketFile) as info:
        await open_unix_listener(str(path), 0o600)
    what = "a regular file" if kind == "file" else "a directory"
    assert f"{beside}, is taken ({what} of uid {OTHER} (no user name), mode " in str(info.value)
    assert info.value.exit_code == 78
    assert beside.lstat().st_uid == OTHER
    assert not path.exists()


async def test_a_leftover_socket_of_its_own_at_the_temporary_name_is_replaced(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcpd.sock"
    leftover = socket.socket(socket.AF_UNIX)
    leftover.bind(str(tmp_path / f".mcpd.sock.{os.getpid()}"))
    leftover.close()
    with trio.fail_after(30):
        listener, bound = await open_unix_listener(str(path), 0o600)
    assert stat.S_ISSOCK(path.lstat().st_mode)
    bound.remove()
    await listener.aclose()
