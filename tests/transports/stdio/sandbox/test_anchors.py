"""Where a hidden path is now: what it named when first hidden is followed wherever it
is moved, a link pointed elsewhere hides both, a path removed is found afresh, and
what cannot be found again stops sandboxed servers from starting."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from transports.stdio.sandbox import anchors
from transports.stdio.sandbox.hidden_links import Needed
from transports.stdio.sandbox.plan import SandboxError


@pytest.fixture
def tmp(tmp_path: Path) -> Iterator[Path]:
    anchors.forget_all()
    yield Path(os.path.realpath(tmp_path))
    anchors.forget_all()


def test_a_path_in_place_is_hidden_where_it_is_and_nothing_is_said(tmp: Path) -> None:
    (tmp / "state").mkdir()
    for alias in ("a", "b"):
        assert anchors.places(str(tmp / "state"), alias) == [str(tmp / "state")]
    assert anchors.places(str(tmp / "missing"), "a") == []
    assert anchors.notices() == []


def test_a_moved_directory_is_hidden_where_it_went_and_said_once(
    tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp / "lib" / "mcpd"
    state.mkdir(parents=True)
    anchors.places(str(state), "steady")
    (tmp / "lib").rename(tmp / "lib.moved")
    moved = str(tmp / "lib.moved" / "mcpd")
    with caplog.at_level(logging.WARNING, logger="mcpd.stdio"):
        assert anchors.places(str(state), "hostile") == [moved]
        state.mkdir(parents=True)  # something new at the old path: both are hidden
        assert anchors.places(str(state), "hostile") == [moved, str(state)]
        assert anchors.places(str(state), "hostile") == [moved, str(state)]
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert said[0].startswith(f"hostile: {state} is not where it was: it is now at {moved};")
    assert said[0].endswith("(servers started while it was in place: steady)")
    assert [r.mcpd_event for r in caplog.records] == ["sandbox_moved"] * 2  # type: ignore[attr-defined]
    (notice,) = anchors.notices()
    assert moved in notice and "until it restarts" in notice
    # Put back: hidden where it is, and nothing to say any more.
    os.rmdir(state)
    os.rmdir(tmp / "lib")
    (tmp / "lib.moved").rename(tmp / "lib")
    assert anchors.places(str(state), "hostile") == [str(state)]
    assert anchors.notices() == []


def test_a_link_pointed_elsewhere_hides_what_it_pointed_to_as_well(tmp: Path) -> None:
    for d in ("keys", "decoy"):
        (tmp / d).mkdir()
    (tmp / ".aws").symlink_to(tmp / "keys")
    assert anchors.places(str(tmp / ".aws"), "a") == [str(tmp / "keys")]
    (tmp / ".aws").unlink()
    (tmp / ".aws").symlink_to(tmp / "decoy")
    assert anchors.places(str(tmp / ".aws"), "a") == [str(tmp / "keys"), str(tmp / "decoy")]
    (notice,) = anchors.notices()
    assert notice.startswith(f"{tmp / '.aws'} names {tmp / 'decoy'} now")


def test_a_path_removed_is_found_afresh(tmp: Path) -> None:
    (tmp / "netrc").write_text("one")
    anchors.places(str(tmp / "netrc"), "a")
    # An editor's save: a new file in its place.
    (tmp / "netrc.new").write_text("two")
    (tmp / "netrc.new").rename(tmp / "netrc")
    assert anchors.places(str(tmp / "netrc"), "a") == [str(tmp / "netrc")]
    os.unlink(tmp / "netrc")
    assert anchors.places(str(tmp / "netrc"), "a") == []
    assert anchors.notices() == []


def test_a_file_left_only_by_another_name_is_forgotten_said_and_stops_no_server(
    tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As a server that saw ``~/.netrc`` before mcpd first hid it can do: link it
    elsewhere and remove the hidden name. The kernel does not say where it is now."""
    (tmp / "netrc").write_text("t")
    anchors.places(str(tmp / "netrc"), "early")
    os.link(tmp / "netrc", tmp / "elsewhere")
    os.unlink(tmp / "netrc")
    with caplog.at_level(logging.WARNING, logger="mcpd.stdio"):
        for alias in ("next", "after"):
            assert anchors.places(str(tmp / "netrc"), alias) == []
    (said,) = caplog.records  # once
    assert said.mcpd_event == "sandbox_moved"  # type: ignore[attr-defined]
    (notice,) = anchors.notices()
    assert said.getMessage() == f"next: {notice}"
    assert notice.startswith(
        f"{tmp / 'netrc'} was removed while the file it named keeps another name, which mcpd "
        "cannot find (servers started while it was in place: early);"
    ), notice
    assert notice.endswith("sandboxed servers start as before")
    # A new file at the name is hidden afresh; what was said stays until mcpd restarts.
    (tmp / "netrc").write_text("new")
    assert anchors.places(str(tmp / "netrc"), "after") == [str(tmp / "netrc")]
    assert anchors.notices() == [notice]


def test_a_pattern_stands_for_what_matches_it_now_and_what_it_matched_before(
    tmp: Path,
) -> None:
    # Key agents make a directory of their own in /tmp each time one starts.
    first, second = tmp / "ssh-AbC123", tmp / "ssh-xyz"
    first.mkdir()
    (tmp / "ssh-notes.txt").write_text("x")
    (tmp / "other").mkdir()
    pattern = str(tmp / "ssh-*")
    assert anchors.matching(pattern) == [str(first), str(tmp / "ssh-notes.txt")]
    anchors.places(str(first), "a")
    first.rename(tmp / "moved")
    second.mkdir()
    # The one it matched is followed where it went; a new one is found.
    assert anchors.matching(pattern) == [str(first), str(tmp / "ssh-notes.txt"), str(second)]
    assert anchors.places(str(first), "a") == [str(tmp / "moved")]
    assert anchors.matching(str(tmp / "none-*")) == []
    assert anchors.matching(str(tmp / "missing" / "ssh-*")) == []
    assert anchors.matching(str(tmp / "plain")) == [str(tmp / "plain")]


def test_a_pattern_leaves_out_what_another_user_owns(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp / "ssh-theirs").mkdir()
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(tmp).st_uid + 1)
    assert anchors.matching(str(tmp / "ssh-*")) == []


def test_a_pattern_leaves_out_a_link_that_matches_it(tmp: Path) -> None:
    """A server could make ``/tmp/ssh-x`` a link to what it wants the others to lose."""
    (tmp / "work").mkdir()
    (tmp / "ssh-agent").mkdir()
    (tmp / "ssh-x").symlink_to(tmp / "work")
    assert anchors.matching(str(tmp / "ssh-*")) == [str(tmp / "ssh-agent")]


# -- links at hidden names: mcpd's user's, so perhaps a server's --


@pytest.fixture
def home(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's home, as mcpd's environment names it."""
    (tmp / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp / "home"))
    return tmp / "home"


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("/usr", "which is the root or a directory at its top"),
        ("/", "which is the root or a directory at its top"),
        ("/etc/ssl", "which lies in /etc, one of the system's directories"),
        ("/proc/sys/kernel", "which lies in /proc, one of the system's directories"),
        ("home", "which is or holds the home of mcpd's user"),
        (".", "which is or holds the home of mcpd's user"),
    ],
)
def test_a_link_to_where_every_server_needs_hides_nothing_and_is_named(
    tmp: Path, home: Path, target: str, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    """As a sandboxed server can do: ``ln -s /usr ~/.kube``, where nothing was."""
    kube = home / ".kube"
    kube.symlink_to(tmp / target if target in ("home", ".") else target)
    real = os.path.realpath(kube)
    with caplog.at_level(logging.WARNING, logger="mcpd.stdio"):
        for alias in ("a", "b"):
            assert anchors.places(str(kube), alias) == []
    (notice,) = anchors.notices()
    assert notice.startswith(f"{kube} is a symbolic link to {real}, {why}"), notice
    assert notice.endswith(": no link makes mcpd hide that (remove the link unless you made it)")
    (said,) = caplog.records
    assert said.mcpd_event == "sandbox_link"  # type: ignore[attr-defined]
    assert anchors.followed(str(kube)) is None
    # Gone: nothing to say any more.
    kube.unlink()
    assert anchors.places(str(kube), "a") == []
    assert anchors.notices() == []


def test_a_link_to_what_the_server_starting_needs_is_not_hidden_from_it(
    tmp: Path, home: Path
) -> None:
    """A project folder some server works in: that server keeps it, the others do not."""
    project = tmp / "project"
    (project / "src").mkdir(parents=True)
    (home / ".kube").symlink_to(project)
    needs = [Needed(str(project / "src"), "the working directory of servers.a")]
    assert anchors.places(str(home / ".kube"), "a", needs) == []
    (notice,) = anchors.notices()
    assert notice.startswith(
        f"{home / '.kube'} is a symbolic link to {project}, which is or holds the working "
        f"directory of servers.a ({project / 'src'}):"
    ), notice
    assert anchors.places(str(home / ".kube"), "b") == [str(project)]


@pytest.mark.parametrize(
    ("hidden", "linked"), [(".aws", ".aws"), (".config/gh", ".config")], ids=["store", "parent"]
)
@pytest.mark.parametrize("looked", [True, False], ids=["held", "first-look"])
def test_a_place_reached_through_a_link_into_a_linked_store_refuses_the_start(
    tmp: Path, home: Path, hidden: str, linked: str, looked: bool
) -> None:
    """A server's working directory swapped for a link into ``~/.aws`` (kept in a
    dotfiles checkout), or into ``~/.config/gh`` under a linked ``~/.config``: whether
    mcpd hid the store at an earlier start or looks at it first now, the server is
    refused, and the store stays hidden from the others."""
    dotfiles = tmp / "dotfiles" / linked.lstrip(".")
    store = tmp / "dotfiles" / hidden.lstrip(".")
    store.mkdir(parents=True)
    (home / linked).parent.mkdir(parents=True, exist_ok=True)
    (home / linked).symlink_to(dotfiles)
    name = str(home / hidden)
    if looked:
        assert anchors.places(name, "a") == [str(store)]
    project = home / "proj"
    project.symlink_to(store)
    need = Needed(str(store), "the working directory of servers.hd", str(project))
    with pytest.raises(SandboxError) as refused:
        anchors.places(name, "hd", [need])
    assert str(refused.value).startswith(
        f"{home / linked} is a symbolic link to {dotfiles}"
        if hidden == linked
        else f"{name} lies through the symbolic link {home / linked}, to {store}"
    ), refused.value
    assert f"the working directory of servers.hd ({project}) leads into it" in str(refused.value)
    assert anchors.places(name, "b") == [str(store)]
    assert anchors.notices() == []


def test_a_command_found_through_a_link_into_a_linked_store_refuses_the_start(
    tmp: Path, home: Path
) -> None:
    keys = tmp / "dotfiles" / "aws"
    keys.mkdir(parents=True)
    (home / ".aws").symlink_to(keys)
    (home / "tools").symlink_to(keys)
    need = Needed(str(keys / "run"), "the command of servers.hd", str(home / "tools" / "run"))
    with pytest.raises(SandboxError, match=r"the command of servers.hd \(.*/tools/run\)"):
        anchors.places(str(home / ".aws"), "hd", [need])
    assert anchors.places(str(home / ".aws"), "b") == [str(keys)]


def test_a_users_link_to_a_store_elsewhere_stays_hidden_wherever_it_is_pointed(
    tmp: Path, home: Path
) -> None:
    """``~/.aws`` kept on another disk: pointed at the system, or removed, by a server."""
    keys = tmp / "data" / "aws"
    keys.mkdir(parents=True)
    aws = home / ".aws"
    aws.symlink_to(keys)
    assert anchors.places(str(aws), "a") == [str(keys)]
    assert anchors.notices() == []
    aws.unlink()
    aws.symlink_to("/usr")
    assert anchors.places(str(aws), "a") == [str(keys)]
    assert [n.split(",")[0] for n in anchors.notices()] == [f"{aws} is a symbolic link to /usr"]
    aws.unlink()
    assert anchors.places(str(aws), "a") == [str(keys)]


def test_a_link_that_appears_after_mcpd_first_looked_is_followed_and_named(
    tmp: Path, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project = tmp / "project"
    project.mkdir()
    kube = home / ".kube"
    assert anchors.places(str(kube), "a") == []  # nothing there as the first server starts
    kube.symlink_to(project)
    with caplog.at_level(logging.WARNING, logger="mcpd.stdio"):
        assert anchors.places(str(kube), "b") == [str(project)]
        assert anchors.places(str(kube), "c") == [str(project)]
    (notice,) = anchors.notices()
    assert notice.startswith(
        f"{kube} is a symbolic link to {project}, which it was not when mcpd first looked: "
        "mcpd hides that from the servers started from now on, until it restarts"
    ), notice
    assert [r.getMessage() for r in caplog.records] == [f"b: {notice}"]
    # Removed, it is still said, and what it led to still hidden, until mcpd restarts.
    kube.unlink()
    assert anchors.places(str(kube), "d") == [str(project)]
    assert anchors.notices() == [notice]


# -- names another user holds --

THEIRS = 4242  # another local user's uid


def theirs(path: Path) -> Path:
    """``path`` given to another user, as if they had made it (a link is given itself)."""
    os.lchown(path, THEIRS, THEIRS)
    return path


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a path away")


@needs_root
def test_another_users_link_at_a_hidden_name_is_not_followed_and_is_named(
    tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As ``ln -s ~victim/work /tmp/tmux-UID`` before mcpd starts: what it points to
    stays in the servers' sight, and mcpd says whose link it found instead."""
    (tmp / "work").mkdir()
    planted = theirs(_link(tmp / "tmux-0", tmp / "work"))
    with caplog.at_level(logging.WARNING, logger="mcpd.stdio"):
        for alias in ("a", "b"):
            assert anchors.places(str(planted), alias) == []
    (notice,) = anchors.notices()
    assert notice.startswith(
        f"{planted} is another user's symbolic link (uid {THEIRS}, no user name) to "
        f"{tmp / 'work'}: "
    ), notice
    assert "does not follow it" in notice
    (said,) = [r for r in caplog.records]  # once, whichever server started
    assert said.getMessage() == f"a: {notice}"
    assert said.mcpd_event == "sandbox_foreign"  # type: ignore[attr-defined]
    # Gone: nothing more to say, and the user's own directory there is hidden.
    planted.unlink()
    planted.mkdir()
    assert anchors.places(str(planted), "a") == [str(planted)]
    assert anchors.notices() == []


@needs_root
def test_another_users_directory_at_a_hidden_name_is_left_as_it_is_and_named(tmp: Path) -> None:
    planted = tmp / "mcpd-pages-0"
    planted.mkdir()
    theirs(planted)
    assert anchors.places(str(planted), "a") == []
    (notice,) = anchors.notices()
    assert notice.startswith(f"{planted} is another user's directory (uid {THEIRS}, ")


@needs_root
def test_a_hidden_name_through_another_users_link_is_not_followed(tmp: Path) -> None:
    (tmp / "work" / "S-root").mkdir(parents=True)
    theirs(_link(tmp / "screens", tmp / "work"))
    name = str(tmp / "screens" / "S-root")
    assert anchors.places(name, "a") == []
    (notice,) = anchors.notices()
    assert notice.startswith(f"{name} lies through {tmp / 'screens'}, another user's symbolic ")


@needs_root
def test_what_was_hidden_stays_hidden_where_it_went_when_another_user_takes_its_name(
    tmp: Path,
) -> None:
    (tmp / "pages").mkdir()
    anchors.places(str(tmp / "pages"), "a")
    (tmp / "pages").rename(tmp / "pages.old")
    (tmp / "work").mkdir()
    theirs(_link(tmp / "pages", tmp / "work"))
    assert anchors.places(str(tmp / "pages"), "a") == [str(tmp / "pages.old")]
    assert len(anchors.notices()) == 2


@needs_root
def test_a_link_of_mcpds_user_or_roots_is_followed_whoever_owns_what_it_leads_to(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For an mcpd run by an ordinary user (uid 1000) as well as by root."""
    (tmp / "keys").mkdir()
    theirs(tmp / "keys")
    mine = _link(tmp / ".aws", tmp / "keys")
    roots = _link(tmp / ".kube", tmp / "keys")
    planted = theirs(_link(tmp / ".netrc", tmp / "keys"))
    os.lchown(mine, 1000, 1000)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    for link in (mine, roots):
        assert anchors.places(str(link), "a") == [str(tmp / "keys")]
    assert anchors.places(str(planted), "a") == []
    anchors.forget_all()
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # root: the ordinary user's is not its own
    assert anchors.places(str(roots), "a") == [str(tmp / "keys")]
    assert anchors.places(str(mine), "a") == anchors.places(str(planted), "a") == []


def _link(path: Path, to: Path) -> Path:
    path.symlink_to(to)
    return path
