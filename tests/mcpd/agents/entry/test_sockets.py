"""The profiles' own sockets, bound, served and closed directly: each connection is
handed over with its profile's name; a socket that cannot be bound stops the start with
the key to change, and on a reload is only reported; a reload binds new profiles,
closes removed ones, rebinds a changed one and leaves the others' connections alone; a
socket rebound where one of ours listens takes its place with no moment where the path
is free; a reload's new places are claimed before it is applied, or refused naming the
key; a live socket of someone else's is never taken, a stale one is; nothing is left
behind on the way out; the socket's group is the allowed group, rebound when a reload
changes it; and whom a reload allows while the mode shuts them out is warned of."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import socket
import stat
import struct
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest
import trio

from mcpd.agents.entry.sockets import Leave, ProfileSockets
from mcpd.config.tables.model import ConfigError
from mcpd.config.tables.profiles import ProfileConfig
from mcpd.local.ownership.owners import user_name
from mcpd.starting.cannot_start import DaemonError

TIMEOUT = 10
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user")
OTHER = 54_321


class Served:
    """The handler: each connection's profile, and an echo of what it sends."""

    def __init__(self) -> None:
        self.profiles: list[str] = []

    async def __call__(self, stream: trio.SocketStream, profile: str, leave: Leave) -> None:
        self.profiles.append(profile)
        async with stream:
            async for data in stream:
                await stream.send_all(data)


def profile(
    path: Path | None,
    *,
    socket_mode: str = "0600",
    allow_uids: list[int] | None = None,
    allow_groups: list[str] | None = None,
) -> ProfileConfig:
    return ProfileConfig(
        socket=None if path is None else str(path),
        socket_mode=socket_mode,
        allow_uids=allow_uids or [],
        allow_groups=allow_groups or [],
    )


@contextlib.asynccontextmanager
async def serving(
    profiles: Mapping[str, ProfileConfig], served: Served | None = None
) -> AsyncIterator[ProfileSockets]:
    sockets = ProfileSockets(served or Served(), lambda profile: lambda: 0)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(sockets.run, profiles)
            yield sockets
            nursery.cancel_scope.cancel()


async def echo(path: Path | str, data: bytes = b"ping") -> bytes:
    async with await trio.open_unix_socket(str(path)) as stream:
        await stream.send_all(data)
        return await stream.receive_some(100)


async def refused(path: Path) -> bool:
    try:
        async with await trio.open_unix_socket(str(path)):
            return False
    except (ConnectionRefusedError, FileNotFoundError):
        return True


async def start_fails(profiles: Mapping[str, ProfileConfig]) -> str:
    """What stops the start: the one error, out of the groups of the nurseries it left."""
    with pytest.raises(BaseExceptionGroup) as info:
        async with serving(profiles):
            pytest.fail("started")
    error: BaseException = info.value
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    assert isinstance(error, DaemonError)
    return str(error)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def someone_listening(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(1)
    return sock


async def test_each_profile_with_a_socket_is_served_as_itself(tmp_path: Path) -> None:
    served = Served()
    profiles = {
        "dev": profile(
            tmp_path / "dev.sock", allow_uids=[1001], allow_groups=["root", "nogroup-x"]
        ),
        "ops": profile(tmp_path / "ops.sock", socket_mode="0660"),
        "plain": profile(None),
    }
    async with serving(profiles, served) as sockets:
        assert sockets.paths() == {
            "dev": str(tmp_path / "dev.sock"),
            "ops": str(tmp_path / "ops.sock"),
        }
        assert (mode_of(tmp_path / "dev.sock"), mode_of(tmp_path / "ops.sock")) == (0o600, 0o660)
        assert await echo(tmp_path / "dev.sock") == b"ping"
        assert await echo(tmp_path / "ops.sock") == b"ping"
        assert served.profiles == ["dev", "ops"]
        # A group that does not exist lets no one in; one that does is its gid.
        assert sockets.allowed("dev") == (frozenset({1001}), frozenset({0}))
        assert sockets.allowed("plain") == (frozenset(), frozenset())
        assert sockets.allowed("nobody") == (frozenset(), frozenset())
        assert sockets.errors == {}
    assert not (tmp_path / "dev.sock").exists() and not (tmp_path / "ops.sock").exists()


async def test_a_relative_socket_path_is_bound_where_it_was_when_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with serving({"dev": profile(Path("run/dev.sock"))}) as sockets:
        assert sockets.paths() == {"dev": str(tmp_path / "run" / "dev.sock")}
        assert await echo(tmp_path / "run" / "dev.sock") == b"ping"


async def test_a_socket_that_cannot_be_bound_at_start_names_the_profiles_key(
    tmp_path: Path,
) -> None:
    (tmp_path / "taken").write_text("a file of someone's")
    profiles = {"a": profile(tmp_path / "a.sock"), "b": profile(tmp_path / "taken")}
    said = await start_fails(profiles)
    assert said.startswith("profiles.b.socket: ")
    assert said.endswith("exists and is not a socket; not replacing it")
    assert (tmp_path / "taken").read_text() == "a file of someone's"
    # What was bound before the failure is not left behind.
    assert not (tmp_path / "a.sock").exists()


async def test_a_live_socket_of_someone_elses_is_never_taken(tmp_path: Path) -> None:
    path = tmp_path / "dev.sock"
    other = someone_listening(path)
    try:
        said = await start_fails({"dev": profile(path)})
        assert said == (
            f"profiles.dev.socket: something already listens on {path} (another mcpd, or a "
            f"program that took its place; a socket of uid {os.getuid()} "
            f"({user_name(os.getuid())}), mode "
            f"{stat.S_IMODE(path.lstat().st_mode):04o}); not replacing it"
        )
        assert stat.S_ISSOCK(path.lstat().st_mode)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.connect(str(path))  # still the other's
    finally:
        other.close()


async def test_a_stale_socket_file_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "dev.sock"
    someone_listening(path).close()  # the file stays, nobody listens
    async with serving({"dev": profile(path)}):
        assert await echo(path) == b"ping"


async def test_a_symbolic_link_as_the_socket_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("kept")
    (tmp_path / "dev.sock").symlink_to(target)
    said = await start_fails({"dev": profile(tmp_path / "dev.sock")})
    assert said.endswith("exists and is not a socket; not replacing it")
    assert target.read_text() == "kept" and (tmp_path / "dev.sock").is_symlink()


@needs_root
async def test_a_directory_link_of_another_users_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    link = tmp_path / "run"
    link.symlink_to(tmp_path / "real")
    os.lchown(link, OTHER, OTHER)
    said = await start_fails({"dev": profile(link / "dev.sock")})
    assert said.startswith(f"profiles.dev.socket: will not listen on {link / 'dev.sock'}: ")
    assert f"the symbolic link {link} belongs to uid {OTHER}" in said
    assert list((tmp_path / "real").iterdir()) == []


async def test_a_reload_binds_closes_and_rebinds_and_keeps_the_others_connections(
    tmp_path: Path,
) -> None:
    served = Served()
    kept, gone, moved = tmp_path / "kept.sock", tmp_path / "gone.sock", tmp_path / "moved.sock"
    before = {"kept": profile(kept), "gone": profile(gone), "moved": profile(moved)}
    async with serving(before, served) as sockets:
        async with await trio.open_unix_socket(str(kept)) as stream:
            await stream.send_all(b"1")
            assert await stream.receive_some(10) == b"1"
            await sockets.apply(
                {
                    "kept": profile(kept, allow_uids=[7]),
                    "moved": profile(moved, socket_mode="0660"),
                    "new": profile(tmp_path / "new.sock"),
                }
            )
            # The connection made before the reload is served on.
            await stream.send_all(b"2")
            assert await stream.receive_some(10) == b"2"
        assert sockets.paths() == {
            "kept": str(kept),
            "moved": str(moved),
            "new": str(tmp_path / "new.sock"),
        }
        assert sockets.allowed("kept") == (frozenset({7}), frozenset())
        assert not gone.exists() and await refused(gone)
        assert mode_of(moved) == 0o660 and await echo(moved) == b"ping"
        assert await echo(tmp_path / "new.sock") == b"ping"
        assert served.profiles == ["kept", "moved", "new"]


async def test_a_socket_that_cannot_be_bound_on_a_reload_is_reported_and_the_rest_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "taken").write_text("")
    async with serving({"dev": profile(tmp_path / "dev.sock")}) as sockets:
        with caplog.at_level(logging.ERROR, "mcpd.agents"):
            await sockets.apply(
                {"dev": profile(tmp_path / "dev.sock"), "bad": profile(tmp_path / "taken")}
            )
        assert set(sockets.errors) == {"bad"}
        assert "exists and is not a socket" in sockets.errors["bad"]
        assert "profile bad: not listening on its socket" in caplog.text
        assert sockets.paths() == {"dev": str(tmp_path / "dev.sock")}
        assert await echo(tmp_path / "dev.sock") == b"ping"
        # Once the profile's socket is fixed, the next reload binds it and forgets the error.
        await sockets.apply(
            {"dev": profile(tmp_path / "dev.sock"), "bad": profile(tmp_path / "bad.sock")}
        )
        assert sockets.errors == {}
        assert await echo(tmp_path / "bad.sock") == b"ping"


class Removals:
    """The names removed from a directory (inotify's IN_DELETE) while it is watched."""

    IN_MOVED_TO, IN_DELETE = 0x80, 0x200

    def __init__(self, directory: Path) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self._fd >= 0, os.strerror(ctypes.get_errno())
        mask = self.IN_MOVED_TO | self.IN_DELETE
        assert self._libc.inotify_add_watch(self._fd, bytes(directory), mask) >= 0

    def events(self) -> list[tuple[str, str]]:
        """("removed" | "moved in", name) of each event so far, in order."""
        try:
            data = os.read(self._fd, 1 << 16)
        except BlockingIOError:
            return []
        out = []
        while data:
            _, mask, _, size = struct.unpack_from("iIII", data)
            name = data[16 : 16 + size].rstrip(b"\0").decode()
            out.append(("removed" if mask & self.IN_DELETE else "moved in", name))
            data = data[16 + size :]
        return out

    def close(self) -> None:
        os.close(self._fd)


async def test_a_socket_rebound_in_place_is_never_removed_meanwhile(tmp_path: Path) -> None:
    # Between the old socket's close and the new one's bind, anyone (a server mcpd
    # started) could bind the path and be the profile's socket from then on.
    served = Served()
    dev, ops = tmp_path / "dev.sock", tmp_path / "ops.sock"
    async with serving({"dev": profile(dev), "ops": profile(ops)}, served) as sockets:
        watch = Removals(tmp_path)
        try:
            # dev's mode changes; ops and a new profile swap into each other's places.
            await sockets.apply(
                {
                    "dev": profile(dev, socket_mode="0660"),
                    "ops": profile(tmp_path / "new.sock"),
                    "new": profile(ops),
                }
            )
            events = watch.events()
        finally:
            watch.close()
        assert [name for what, name in events if what == "removed"] == []
        assert sorted(name for what, name in events if what == "moved in") == [
            "dev.sock",
            "new.sock",
            "ops.sock",
        ]
        assert mode_of(dev) == 0o660
        for path in (dev, ops, tmp_path / "new.sock"):
            assert await echo(path) == b"ping"
        assert served.profiles == ["dev", "new", "ops"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["dev.sock", "new.sock", "ops.sock"]


async def test_a_claimed_socket_is_taken_before_the_reload_is_applied(tmp_path: Path) -> None:
    served = Served()
    dev, new = tmp_path / "dev.sock", tmp_path / "new.sock"
    async with serving({"dev": profile(dev)}, served) as sockets:
        reloaded = {"dev": profile(dev, socket_mode="0660"), "new": profile(new)}
        await sockets.claim(reloaded)
        # The new place is mcpd's at once; the changed one is still the old socket.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as other:
            with pytest.raises(OSError) as refused_bind:
                other.bind(str(new))
            assert refused_bind.value.errno == errno.EADDRINUSE
        assert mode_of(dev) == 0o600 and await echo(dev) == b"ping"
        # A reload given up lets go of what it claimed, and leaves the rest as it was.
        sockets.release()
        assert not new.exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["dev.sock"]
        await sockets.claim(reloaded)
        await sockets.apply(reloaded)
        assert mode_of(dev) == 0o660
        assert await echo(dev) == b"ping" and await echo(new) == b"ping"
        assert served.profiles == ["dev", "dev", "new"]


async def test_a_claim_that_cannot_bind_names_the_key_and_keeps_nothing(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file of someone's")
    dev = tmp_path / "dev.sock"
    async with serving({"dev": profile(dev)}) as sockets:
        with pytest.raises(ConfigError) as refused_claim:
            await sockets.claim(
                {
                    "dev": profile(dev),
                    "fresh": profile(tmp_path / "fresh.sock"),
                    "bad": profile(tmp_path / "taken"),
                }
            )
        assert refused_claim.value.path == "profiles.bad.socket"
        assert "exists and is not a socket" in refused_claim.value.message
        assert sorted(p.name for p in tmp_path.iterdir()) == ["dev.sock", "taken"]
        assert sockets.paths() == {"dev": str(dev)}
        assert await echo(dev) == b"ping"


# Group and user ids no database here names.
GROUP, OTHER_GROUP, STRANGER = 54_331, 54_332, 54_333


@needs_root
async def test_a_reload_that_changes_the_allowed_group_gives_the_socket_the_new_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "dev.sock"
    first = profile(path, socket_mode="0660", allow_groups=[str(GROUP)])
    async with serving({"dev": first}, Served()) as sockets:
        assert path.stat().st_gid == GROUP
        reloaded = {"dev": profile(path, socket_mode="0660", allow_groups=[str(OTHER_GROUP)])}
        await sockets.claim(reloaded)
        await sockets.apply(reloaded)
        assert path.stat().st_gid == OTHER_GROUP
        assert await echo(path) == b"ping"


async def test_a_reload_that_allows_a_user_the_mode_shuts_out_warns_of_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "mcpd")
    path = tmp_path / "dev.sock"
    async with serving({"dev": profile(path)}, Served()) as sockets:
        assert "cannot open the socket file" not in caplog.text
        await sockets.apply({"dev": profile(path, allow_uids=[STRANGER])})
    assert (
        f"profiles.dev: uid {STRANGER} cannot open the socket file, whose mode 0600" in caplog.text
    )
