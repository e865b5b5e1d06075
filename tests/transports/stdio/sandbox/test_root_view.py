"""What a strict sandbox shows of the system's directories under a root mcpd: ``/etc``
as a view built, as each server starts, of what others may read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from transports.stdio.sandbox import host
from transports.stdio.sandbox.built_view import BuiltView, ViewEntry
from transports.stdio.sandbox.plan import Sandbox
from transports.stdio.sandbox.root_view import others_view


def test_the_view_holds_what_others_may_read_and_nothing_else(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    (etc / "ssl" / "private").mkdir(parents=True)
    (etc / "ssl" / "private").chmod(0o700)
    (etc / "ssl" / "certs").mkdir()
    (etc / "ssl" / "certs" / "ca.pem").write_text("public")
    (etc / "shadow").write_text("root:*")
    (etc / "shadow").chmod(0o640)
    (etc / "passwd").write_text("root:x")
    (etc / "passwd").chmod(0o644)
    (etc / "listed").mkdir(0o711)  # entered, not listed: what is readable in it stays
    (etc / "listed" / "ssh_host_key").write_text("k")
    (etc / "listed" / "ssh_host_key").chmod(0o600)
    (etc / "listed" / "moduli").write_text("m")
    (etc / "mtab").symlink_to(etc / "shadow")  # made anew: what it leads to is left out
    assert others_view(str(etc)) == BuiltView(
        str(etc),
        (
            ViewEntry(str(etc / "listed"), "made"),
            ViewEntry(str(etc / "listed" / "moduli"), "bound"),
            ViewEntry(str(etc / "mtab"), "link", str(etc / "shadow")),
            ViewEntry(str(etc / "passwd"), "bound"),
            ViewEntry(str(etc / "ssl"), "made"),
            ViewEntry(str(etc / "ssl" / "certs"), "bound"),
        ),
    )


def test_the_view_is_a_read_only_tmpfs_of_its_entries() -> None:
    view = BuiltView(
        "/etc",
        (
            ViewEntry("/etc/ssl", "made"),
            ViewEntry("/etc/ssl/certs", "bound"),
            ViewEntry("/etc/mtab", "link", "../proc/self/mounts"),
        ),
    )
    assert view.args() == [
        *("--perms", "0755", "--tmpfs", "/etc"),
        *("--perms", "0755", "--dir", "/etc/ssl"),
        *("--ro-bind-try", "/etc/ssl/certs", "/etc/ssl/certs"),
        *("--symlink", "../proc/self/mounts", "/etc/mtab"),
    ]


def test_a_strict_sandbox_under_root_builds_etc_and_leaves_out_opt(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mcpd runs as root only for root")
    home = str(tmp_path / "state" / "mcpd" / "homes" / "s")
    box = Sandbox(level="strict", home=home, alias="s", where="servers.s")
    found = host.resolve(box, "/bin/true")
    [etc] = found.built
    shown = {e.path for e in etc.entries}
    system = [p.path for p in host._system()]
    assert etc.root == "/etc" and "/etc/passwd" in shown and "/etc/shadow" not in shown
    assert not [m for m in found.mounts if m.kind.startswith("hide") and m.path.startswith("/etc/")]
    assert "/opt" not in system and "/etc" in system
    default = host.resolve(Sandbox(home=home, alias="s", where="servers.s"), "/bin/true")
    assert default.built == ()
