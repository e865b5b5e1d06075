"""Where a grant leads as a server starts: never to mcpd's own places (its state, its
config), however it is named; to another hidden place (a credential store) only where
the config names that place by its own path; and a grant that holds what is hidden, as
the config names it, keeps what it holds covered; and what is bound is what was checked,
whatever is swapped on the way after."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.system import bubblewrap
from transports.stdio.sandbox import host
from transports.stdio.sandbox.grant_reach import Hidden, overreach
from transports.stdio.sandbox.plan import Mount, Sandbox, SandboxError


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    return Path(os.path.realpath(tmp_path))


STATE = Hidden("/h/.local/state/mcpd", "/h/.local/state/mcpd", own=True)
AWS = Hidden("/h/.aws", "/data/aws", own=False)
HIDDEN = [STATE, AWS]


@pytest.mark.parametrize(
    ("written", "real"),
    [
        ("/h/notes", "/h/.local/state/mcpd"),  # a link re-pointed at the state
        ("/h/notes", "/h/.local/state/mcpd/homes/other"),  # into another server's home
        ("/h/notes", "/h/.local/state"),  # at what holds it
        ("/h/.local/state/mcpd", "/h/.local/state/mcpd"),  # named by its own path
        ("/h/.local/state/mcpd/homes/x", "/h/.local/state/mcpd/homes/x"),
    ],
)
def test_no_grant_leads_to_mcpds_own_places(written: str, real: str) -> None:
    why = overreach(written, real, HIDDEN)
    assert why is not None
    assert f"{STATE.place}, mcpd's own" in why


def test_a_grant_that_holds_mcpds_own_places_as_the_config_names_it_is_bound() -> None:
    assert overreach("/h", "/h", HIDDEN) is None
    assert overreach("/h/.local", "/h/.local", HIDDEN) is None
    # The state kept elsewhere through a link of the user's, and that place granted.
    moved = Hidden("/h/.local/state/mcpd", "/data/state/mcpd", own=True)
    assert overreach("/data", "/data", [moved]) is None


@pytest.mark.parametrize(
    ("written", "real"),
    [("/h/notes", "/data/aws"), ("/h/notes", "/data/aws/sub"), ("/h/notes", "/data")],
)
def test_a_grant_reaches_another_hidden_place_only_as_the_config_names_it(
    written: str, real: str
) -> None:
    why = overreach(written, real, HIDDEN)
    assert why is not None
    assert "through a symbolic link the config does not name" in why
    assert f"{written} leads to {real}" in why


@pytest.mark.parametrize(
    ("written", "real", "hidden"),
    [
        ("/h/projlink", "/h/proj", Hidden("/h/proj/state", "/h/proj/state", own=True)),
        ("/h/notes", "/data/aws", AWS),
        ("/h/notes", "/data", AWS),
    ],
)
def test_a_refused_link_says_to_grant_where_it_leads_by_that_path(
    written: str, real: str, hidden: Hidden
) -> None:
    # The user's own link is refused as a server's would be: the way through is the
    # place's own path, which the refusal names, and which is then bound.
    why = overreach(written, real, [hidden])
    assert why is not None
    assert why.startswith(f"{written} leads to {real}, which ")
    assert why.endswith(
        f"; to grant it, write {real} in the config; a link you did not make, a server "
        "may have: remove it"
    )
    assert "unless you made it" not in why
    assert overreach(real, real, [hidden]) is None


def test_a_link_into_mcpds_own_places_is_refused_whoever_made_it() -> None:
    why = overreach("/h/notes", "/h/.local/state/mcpd", HIDDEN)
    assert why is not None
    assert why.endswith(
        ": no grant shows a server what mcpd keeps, and no link leads there, whoever made "
        "it: remove the link or point it elsewhere (a server may have made it)"
    )
    # Named by its own path, it is refused as plainly, with nothing said of a link.
    why = overreach("/h/.local/state/mcpd", "/h/.local/state/mcpd", HIDDEN)
    assert why is not None
    assert why.endswith(": no grant shows a server what mcpd keeps")


def test_a_hidden_place_the_config_names_is_given_back() -> None:
    assert overreach("/h/.aws", "/data/aws", HIDDEN) is None
    assert overreach("/data/aws", "/data/aws", HIDDEN) is None  # by where it is
    assert overreach("/h/.aws/config", "/data/aws/config", HIDDEN) is None
    assert overreach("/h/notes", "/data/notes", HIDDEN) is None  # nothing hidden there


def sandbox(tmp: Path, **paths: tuple[str, ...]) -> Sandbox:
    home = str(tmp / "state" / "mcpd" / "homes" / "s")
    return Sandbox(home=home, alias="s", where="servers.s", **paths)


def test_a_grant_repointed_at_the_state_directory_is_refused_naming_where_it_leads(
    tmp: Path,
) -> None:
    state = tmp / "state" / "mcpd"
    (state / "homes").mkdir(parents=True)
    (tmp / "data").mkdir()
    notes = tmp / "notes"
    notes.symlink_to(tmp / "data")
    box = sandbox(tmp, hide=(str(state),), own=(str(state),), write=(str(notes),))
    found = host.resolve(box, "/bin/true")
    assert Mount(str(tmp / "data"), "write", str(notes)) in found.mounts
    notes.unlink()
    notes.symlink_to(state)
    for start in (lambda: host.resolve(box, "/bin/true"), lambda: host.grants(box)):
        with pytest.raises(SandboxError) as error:
            start()
        said = str(error.value)
        assert said.startswith(f"servers.s.write[0]: {notes} leads to {state}, which is {state}")
        assert "mcpd's own" in said


def test_what_a_grant_led_to_when_checked_is_what_the_sandbox_shows(tmp: Path) -> None:
    bubblewrap.require()
    notes = tmp / "proj" / "notes"
    other = tmp / "other" / "notes"
    for folder, which in ((notes, "notes\n"), (other, "other\n")):
        folder.mkdir(parents=True)
        (folder / "which").write_text(which)
    box = Sandbox(home=str(tmp / "homes" / "s"), alias="s", where="servers.s", read=(str(notes),))
    argv = ["/bin/cat", str(notes / "which")]
    plan, cwd = host.command_line(argv, {"PATH": "/usr/bin:/bin"}, None, box)
    # Between the check and bubblewrap's mount, the folder above the grant is swapped
    # for a link elsewhere, as anything that may write it could.
    (tmp / "proj").rename(tmp / "proj.x")
    (tmp / "proj").symlink_to("other")
    try:
        done = subprocess.run(
            plan.argv, pass_fds=plan.held, capture_output=True, text=True, cwd=cwd, timeout=30
        )
    finally:
        for fd in plan.held:
            os.close(fd)
    assert done.stdout == "notes\n", done.stderr
