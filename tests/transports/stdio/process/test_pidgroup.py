"""A root mcpd's per-server pids cgroups, on a stand-in cgroup tree in a temporary
folder: where they go (v1, v2 at its root, nowhere), what a server's cgroup holds,
and what is removed after (this mcpd's, and what mcpd processes long gone left)."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

from transports.stdio.process import pidgroup

V1_SELF = "2:cpu:/\n1:pids:/\n0::/\n"
V2_ROOT = "0::/\n"
Tree = Callable[[str | None], Path]


def no_such_pid() -> int:
    """A pid no process can have: one past the largest the kernel hands out."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


@pytest.fixture
def tree(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[str | None], Path]:
    """Point the module at a stand-in cgroup tree; the returned function sets what
    /proc/self/cgroup says (None: it cannot be read) and gives the tree's root."""
    root = tmp_path / "cgroup"
    root.mkdir()
    monkeypatch.setattr(pidgroup, "_V1", str(root / "pids"))
    monkeypatch.setattr(pidgroup, "_V2", str(root))
    monkeypatch.setattr(pidgroup, "_base", [])
    said: list[str | None] = [None]

    def fake_open(path: str, *args: Any, **kwargs: Any) -> IO[Any]:
        if path == "/proc/self/cgroup":
            if said[0] is None:
                raise FileNotFoundError(path)
            return io.StringIO(said[0])
        return open(path, *args, **kwargs)

    monkeypatch.setattr(pidgroup, "open", fake_open, raising=False)

    def saying(text: str | None) -> Path:
        said[0] = text
        return root

    return saying


def test_v1_server_cgroups_go_under_mcpds_own_pids_cgroup(tree: Tree) -> None:
    root = tree("2:cpu:/\n1:pids:/services/mcpd\n0::/\n")
    own = root / "pids" / "services" / "mcpd"
    own.mkdir(parents=True)
    where = pidgroup.base()
    assert where == str(own / f"mcpd-{os.getpid()}")
    assert os.path.isdir(where)


def test_v1_with_its_pids_cgroup_out_of_reach_is_no_limit(tree: Tree) -> None:
    # The pids hierarchy is there, mcpd's own cgroup in it is not (a mount of
    # another namespace's): no limit, and v2 is not tried instead.
    root = tree("1:pids:/elsewhere\n0::/\n")
    (root / "pids").mkdir()
    (root / "cgroup.subtree_control").write_text("pids")
    assert pidgroup.base() is None


def test_v1_at_its_root(tree: Tree) -> None:
    root = tree(V1_SELF)
    (root / "pids").mkdir()
    assert pidgroup.base() == str(root / "pids" / f"mcpd-{os.getpid()}")


def test_v2_at_its_root_with_pids_enabled(tree: Tree) -> None:
    root = tree(V2_ROOT)
    (root / "cgroup.subtree_control").write_text("cpu memory pids\n")
    assert pidgroup.base() == str(root / f"mcpd-{os.getpid()}")


@pytest.mark.parametrize(
    ("self_cgroup", "enabled"),
    [
        ("0::/system.slice/mcpd.service\n", "pids"),
        (V2_ROOT, "cpu memory"),
        (V2_ROOT, None),
        (None, "pids"),
    ],
    ids=[
        "v2 below its root",
        "pids not enabled",
        "no subtree_control",
        "no /proc/self/cgroup",
    ],
)
def test_where_no_cgroup_can_be_made_there_is_no_base(
    tree: Tree, self_cgroup: str | None, enabled: str | None
) -> None:
    root = tree(self_cgroup)
    if enabled is not None:
        (root / "cgroup.subtree_control").write_text(enabled)
    assert pidgroup.base() is None
    assert [p for p in root.iterdir() if p.is_dir()] == []


def test_the_base_is_found_once(tree: Tree) -> None:
    root = tree(V2_ROOT)
    (root / "cgroup.subtree_control").write_text("pids")
    first = pidgroup.base()
    (root / "cgroup.subtree_control").write_text("")
    assert pidgroup.base() == first is not None


def test_leftovers_of_mcpds_long_gone_are_removed_and_nothing_else(
    tree: Tree,
) -> None:
    root = tree(V2_ROOT)
    (root / "cgroup.subtree_control").write_text("pids")
    gone = root / f"mcpd-{no_such_pid()}"
    (gone / "web" / "nested").mkdir(parents=True)
    (gone / "fs").mkdir()
    alive = root / f"mcpd-{os.getppid()}"
    (alive / "web").mkdir(parents=True)
    strangers = [root / "mcpd-x1", root / "system.slice", root / f"other-{no_such_pid()}"]
    for path in strangers:
        path.mkdir()
    pidgroup.base()
    assert not gone.exists()
    assert (alive / "web").is_dir()
    assert all(path.is_dir() for path in strangers)


def test_a_servers_cgroup_holds_its_limit(tree: Tree) -> None:
    root = tree(V2_ROOT)
    (root / "cgroup.subtree_control").write_text("pids")
    procs = pidgroup.procs_file("web-1", 64)
    group = root / f"mcpd-{os.getpid()}" / "web-1"
    assert procs == str(group / "cgroup.procs")
    assert (group / "pids.max").read_text() == "64"
    # A restart of the same server, with a new limit, takes the same cgroup.
    assert pidgroup.procs_file("web-1", 8) == procs
    assert (group / "pids.max").read_text() == "8"


def test_no_cgroup_for_a_server_where_none_can_be_made(tree: Tree) -> None:
    tree("0::/system.slice/mcpd.service\n")
    assert pidgroup.procs_file("web", 64) is None


def test_a_cgroup_whose_limit_cannot_be_written_is_none(tree: Tree) -> None:
    root = tree(V2_ROOT)
    (root / "cgroup.subtree_control").write_text("pids")
    where = pidgroup.base()
    assert where is not None
    # pids.max is a folder here: writing it fails as the kernel's refusal would.
    (Path(where) / "web" / "pids.max").mkdir(parents=True)
    assert pidgroup.procs_file("web", 64) is None


def test_release_removes_an_empty_cgroup_and_leaves_a_busy_one(
    tree: Tree,
) -> None:
    root = tree(V2_ROOT)
    (root / "cgroup.subtree_control").write_text("pids")
    procs = pidgroup.procs_file("web", 64)
    assert procs is not None
    # A stand-in folder keeps its pids.max, as a cgroup with processes left stays.
    pidgroup.release(procs)
    assert os.path.isdir(os.path.dirname(procs))
    os.unlink(os.path.join(os.path.dirname(procs), "pids.max"))
    pidgroup.release(procs)
    assert not os.path.exists(os.path.dirname(procs))
    pidgroup.release(procs)  # twice is harmless


def test_close_removes_this_mcpds_cgroups_and_forgets_them(tree: Tree) -> None:
    root = tree(V2_ROOT)
    (root / "cgroup.subtree_control").write_text("pids")
    where = pidgroup.base()
    assert where is not None
    (Path(where) / "a" / "inner").mkdir(parents=True)
    (Path(where) / "b").mkdir()
    pidgroup.close()
    assert not os.path.exists(where)
    assert pidgroup.base() == where  # found again, and made again
    assert os.path.isdir(where)
    pidgroup.close()
    pidgroup.close()
