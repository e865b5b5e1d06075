"""Where a hidden path is now: what it named when first hidden is followed wherever it
is moved, a link pointed elsewhere hides both, a path removed is found afresh, and
what cannot be found again stops sandboxed servers from starting."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from transports.stdio import anchors
from transports.stdio.sandbox import SandboxError


@pytest.fixture
def tmp(tmp_path: Path) -> Iterator[Path]:
    anchors.release()
    yield Path(os.path.realpath(tmp_path))
    anchors.release()


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


def test_what_cannot_be_found_again_keeps_sandboxed_servers_from_starting(tmp: Path) -> None:
    (tmp / "token").write_text("t")
    anchors.places(str(tmp / "token"), "a")
    # Still there by another name, which the kernel does not say.
    os.link(tmp / "token", tmp / "elsewhere")
    os.unlink(tmp / "token")
    with pytest.raises(SandboxError, match="mcpd cannot find where it is now"):
        anchors.places(str(tmp / "token"), "a")


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
