"""Which directories of the secret files (and the config file) are hidden whole from a
server, and which files are hidden alone and said: the directories are the real ones
a rename in would change what a file's name reads, through symbolic links and ``..``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from transports.stdio.sandbox.plan import Sandbox, SeenPlace
from transports.stdio.sandbox.secret_folders import folders_of, identities, split_secrets


def sandbox_of(tmp_path: Path, *secrets: Path, sees: tuple[SeenPlace, ...] = ()) -> Sandbox:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return Sandbox(
        home=str(home),
        secrets=tuple(str(s) for s in secrets),
        sees=sees,
        alias="probe",
        where="servers.probe",
    )


def made(path: Path, content: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


def test_a_plain_secrets_directory_is_hidden_whole(tmp_path: Path) -> None:
    secret = made(tmp_path / "vault" / "tok")
    got = split_secrets(sandbox_of(tmp_path, secret), "/bin/true", "")
    assert got.folders == (str(tmp_path / "vault"),) and got.exposed == ()


def test_a_linked_secret_file_hides_the_directory_of_the_link_and_of_the_file(
    tmp_path: Path,
) -> None:
    real = made(tmp_path / "vault" / "tok")
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "tok").symlink_to(real)
    linked = tmp_path / "links" / "tok"
    assert folders_of(str(linked)) == [str(tmp_path / "links"), str(tmp_path / "vault")]
    got = split_secrets(sandbox_of(tmp_path, linked), "/bin/true", "")
    assert got.folders == (str(tmp_path / "links"), str(tmp_path / "vault"))


def test_a_chain_of_links_hides_each_directory_on_the_way(tmp_path: Path) -> None:
    real = made(tmp_path / "c" / "tok")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "tok").symlink_to("../c/tok")  # relative to its own directory
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "tok").symlink_to(tmp_path / "b" / "tok")
    found = folders_of(str(tmp_path / "a" / "tok"))
    assert found == [str(tmp_path / d) for d in ("a", "b", "c")]
    assert os.path.realpath(tmp_path / "a" / "tok") == str(real)


def test_dot_dot_after_a_link_is_the_parent_of_the_links_target(tmp_path: Path) -> None:
    made(tmp_path / "deep" / "sub" / "keep")
    made(tmp_path / "deep" / "tok2")
    made(tmp_path / "a" / "needed.txt")
    (tmp_path / "a" / "lnk").symlink_to(tmp_path / "deep" / "sub")
    written = f"{tmp_path}/a/lnk/../tok2"
    got = split_secrets(sandbox_of(tmp_path, Path(written)), "/bin/true", "")
    # Not tmp_path/a, which the server may need and which holds no secret.
    assert got.folders == (str(tmp_path / "deep"),), got


def test_a_directory_the_server_needs_is_not_hidden_and_the_file_is_said(tmp_path: Path) -> None:
    secret = made(tmp_path / "proj" / "tok")
    needs = (SeenPlace(str(tmp_path / "proj" / "data.txt"), "a path servers.probe.env.DATA names"),)
    got = split_secrets(sandbox_of(tmp_path, secret, sees=needs), "/bin/true", "")
    assert got.folders == ()
    (exposed,) = got.exposed
    assert exposed.folder == str(tmp_path / "proj")
    assert "servers.probe.env.DATA" in exposed.why


def test_a_link_whose_target_lies_in_a_needed_directory_is_said(tmp_path: Path) -> None:
    real = made(tmp_path / "proj" / "tok")
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "tok").symlink_to(real)
    work = tmp_path / "proj"
    got = split_secrets(sandbox_of(tmp_path, tmp_path / "links" / "tok"), "/bin/true", str(work))
    assert got.folders == (str(tmp_path / "links"),)
    (exposed,) = got.exposed
    assert exposed.folder == str(work) and "working directory" in exposed.why


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_another_users_directory_is_said_rather_than_claimed_hidden(tmp_path: Path) -> None:
    secret = made(tmp_path / "theirs" / "tok")
    os.chown(tmp_path / "theirs", 4242, 4242)
    got = split_secrets(sandbox_of(tmp_path, secret), "/bin/true", "")
    assert got.folders == ()
    assert "another user's (uid 4242)" in got.exposed[0].why


def test_what_a_reload_compares_is_the_real_file_and_directories(tmp_path: Path) -> None:
    real = made(tmp_path / "vault" / "tok")
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "tok").symlink_to(real)
    covered = identities(
        split_secrets(sandbox_of(tmp_path, tmp_path / "links" / "tok"), "/bin/true", "")
    )
    assert [c.path for c in covered] == [str(tmp_path / "links"), str(tmp_path / "vault")]


def test_a_secret_in_a_directory_not_there_is_watched_and_not_said(tmp_path: Path) -> None:
    missing = tmp_path / "not-yet" / "tok"
    got = split_secrets(sandbox_of(tmp_path, missing), "/bin/true", "")
    (exposed,) = got.exposed
    assert exposed.missing and got.folders == ()
    # What a reload compares: nothing there now, so a file put there later restarts.
    (covered,) = identities(got)
    assert covered.path == str(missing) and covered.key is None
