"""What a strict sandbox covers of the system's directories under a root mcpd: a file
others may not read, a directory others may not enter, found as each server starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from transports.stdio.sandbox import host
from transports.stdio.sandbox.plan import Mount, Sandbox
from transports.stdio.sandbox.root_view import SEARCHED, owner_only


def test_what_others_may_not_read_is_covered_and_nothing_else(tmp_path: Path) -> None:
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
    (etc / "mtab").symlink_to(etc / "shadow")  # covered where it lies
    assert owner_only([str(etc)]) == [
        Mount(str(etc / "listed" / "ssh_host_key"), "hide_file"),
        Mount(str(etc / "shadow"), "hide_file"),
        Mount(str(etc / "ssl" / "private"), "hide_dir"),
    ]


def test_a_strict_sandbox_under_root_covers_etc_and_leaves_out_opt(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mcpd runs as root only for root")
    home = str(tmp_path / "state" / "mcpd" / "homes" / "s")
    box = Sandbox(level="strict", home=home, alias="s", where="servers.s")
    found = host.resolve(box, "/bin/true")
    covers = [m for m in found.mounts if m.kind.startswith("hide") and m.path.startswith("/etc/")]
    system = [p.path for p in host._system()]
    assert covers == owner_only(SEARCHED)
    assert Mount("/etc/shadow", "hide_file") in covers
    assert "/opt" not in system and "/etc" in system
    default = host.resolve(Sandbox(home=home, alias="s", where="servers.s"), "/bin/true")
    assert not [m for m in default.mounts if m.path == "/etc/shadow"]
