"""Following a hidden path through symbolic links: where it leads, whose name on the way
stops the walk, and which places a link may not hide because every server, or the
server starting, needs them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import pytest

from transports.stdio.sandbox.hidden_links import (
    Followed,
    Needed,
    Theirs,
    follow,
    needed,
    reaching,
    spared,
)

THEIRS = 4242  # another local user's uid

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a path away")


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    return Path(os.path.realpath(tmp_path))


def theirs(path: Path) -> Path:
    """``path`` given to another user, as if they had made it (a link is given itself)."""
    os.lchown(path, THEIRS, THEIRS)
    return path


# -- where a path leads --


def test_a_path_with_no_link_on_the_way_leads_to_itself(tmp: Path) -> None:
    (tmp / "keys").mkdir()
    assert follow(str(tmp / "keys")) == Followed(str(tmp / "keys"))


def test_a_path_through_the_users_own_links_leads_where_realpath_does(tmp: Path) -> None:
    (tmp / "data" / "aws").mkdir(parents=True)
    (tmp / "hop").symlink_to("data")  # relative
    (tmp / ".aws").symlink_to(tmp / "hop" / "aws")
    found = follow(str(tmp / ".aws"))
    assert found == Followed(str(tmp / "data" / "aws"), link=str(tmp / ".aws"))
    assert found.path == os.path.realpath(tmp / ".aws")


def test_a_relative_path_and_dot_dot_are_read_from_the_working_directory(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp / "a" / "b").mkdir(parents=True)
    (tmp / "c").mkdir()
    monkeypatch.chdir(tmp / "a")
    assert follow("b/../../c/./") == Followed(str(tmp / "c"))


def test_a_missing_name_leads_to_where_it_would_be(tmp: Path) -> None:
    (tmp / "real").mkdir()
    (tmp / "link").symlink_to(tmp / "real")
    assert follow(str(tmp / "link" / "not" / "yet")) == Followed(
        str(tmp / "real" / "not" / "yet"), link=str(tmp / "link")
    )


@pytest.mark.timeout(10)  # a walk that does not end fails, not hangs
def test_a_loop_of_links_ends_the_walk_instead_of_running_forever(tmp: Path) -> None:
    (tmp / "ping").symlink_to(tmp / "pong")
    (tmp / "pong").symlink_to(tmp / "ping")
    found = follow(str(tmp / "ping"))
    assert isinstance(found, Followed)
    assert found.link == str(tmp / "ping")


# -- names another user holds --


@needs_root
def test_another_users_link_on_the_way_stops_the_walk_and_is_named(tmp: Path) -> None:
    (tmp / "work").mkdir()
    planted = tmp / "tmux-0"
    planted.symlink_to(tmp / "work")
    theirs(planted)
    assert follow(str(planted / "default")) == Theirs(
        str(planted), THEIRS, "symbolic link", link=str(tmp / "work")
    )


@needs_root
@pytest.mark.parametrize("kind", ["directory", "file"])
def test_another_users_name_at_the_path_itself_is_theirs(
    tmp: Path, kind: Literal["directory", "file"]
) -> None:
    target = tmp / "squatted"
    if kind == "directory":
        target.mkdir()
    else:
        target.write_text("")
    theirs(target)
    assert follow(str(target)) == Theirs(str(target), THEIRS, kind)


@needs_root
def test_another_users_directory_a_users_own_link_chose_is_followed(tmp: Path) -> None:
    shared = tmp / "shared"
    shared.mkdir()
    theirs(shared)
    (tmp / ".config").symlink_to(shared)
    assert follow(str(tmp / ".config")) == Followed(str(shared), link=str(tmp / ".config"))


@needs_root
def test_another_users_directory_above_the_path_does_not_stop_the_walk(tmp: Path) -> None:
    (tmp / "home" / "keys").mkdir(parents=True)
    theirs(tmp / "home")
    assert follow(str(tmp / "home" / "keys")) == Followed(str(tmp / "home" / "keys"))


# -- what a link may not hide --


@pytest.mark.parametrize("path", ["/", "/tmp", "/srv"])
def test_the_root_and_a_directory_at_its_top_are_needed(path: str) -> None:
    assert needed(path) == "is the root or a directory at its top"


@pytest.mark.parametrize(
    ("path", "system"),
    [("/usr/bin", "/usr"), ("/usr/share/zoneinfo", "/usr"), ("/etc/ssl/certs", "/etc")],
)
def test_what_lies_in_a_system_directory_is_needed(path: str, system: str) -> None:
    assert needed(path) == f"lies in {system}, one of the system's directories"


def test_a_directory_whose_name_only_begins_like_a_system_one_is_not_needed(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp))
    assert needed("/usrdata/aws") is None
    assert needed("/etc-backup/keys") is None


def test_a_home_of_the_user_and_what_holds_it_are_needed(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp / "home" / "me"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    said = f"is or holds the home of mcpd's user ({home})"
    assert needed(str(home)) == said
    assert needed(str(tmp / "home")) == said
    # What lies in the home is the user's to hide.
    assert needed(str(home / ".aws")) is None


def test_a_place_the_server_starting_names_itself_is_needed_with_what_it_is(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp / "home"))
    command = Needed(str(tmp / "tools" / "bin" / "files"), "the command of servers.files")
    assert needed(str(tmp / "tools"), [command]) == (
        f"is or holds the command of servers.files ({command.path})"
    )
    assert needed(str(tmp / "tools" / "bin" / "files"), [command]) is not None
    # A sibling of that place is no part of it.
    assert needed(str(tmp / "toolshed"), [command]) is None
    assert reaching(str(tmp / "tools"), [command]) is None


def test_a_place_reached_through_a_link_spares_nothing_and_is_said_to_refuse_the_start(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server may have swapped its working directory for a link into the store: the
    store stays hidden, and the start is refused naming that place."""
    monkeypatch.setenv("HOME", str(tmp / "home"))
    store = tmp / "aws"
    work = Needed(str(store / "project"), "the working directory", given=str(tmp / "work"))
    other = Needed(str(tmp / "elsewhere"), "the command")
    assert needed(str(store), [work, other]) is None
    assert reaching(str(store), [other, work]) is work
    assert reaching(str(tmp / "unrelated"), [other, work]) is None


def test_a_link_that_chose_a_needed_place_is_spared_and_one_to_a_store_is_not(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp / "home"))
    assert spared(Followed("/usr", link=str(tmp / ".kube")))
    assert not spared(Followed(str(tmp / "data" / "aws"), link=str(tmp / ".aws")))
    # No link chose it: hidden where it is, whatever it is.
    assert not spared(Followed("/usr"))
