"""Which directories above what a sandbox hides are bound onto themselves, so that the
server cannot rename them: those it could write to, and no others."""

from __future__ import annotations

from transports.stdio.sandbox.fixed_dirs import fixed_dirs
from transports.stdio.sandbox.plan import Mount

HOME = "/var/lib/mcpd/homes/s"


def fixed(*mounts: Mount, level: str = "default") -> list[str]:
    found = fixed_dirs(mounts, HOME, level)  # type: ignore[arg-type]
    assert all(m.kind == "fixed" for m in found)
    return [m.path for m in found]


def test_every_directory_above_a_hidden_one_is_fixed_at_the_default_level() -> None:
    got = fixed(Mount("/home/u/.local/state/mcpd", "hide_dir"), Mount("/home/u/.ssh", "hide_dir"))
    assert got == ["/home", "/home/u", "/home/u/.local", "/home/u/.local/state"]


def test_a_hidden_file_s_directories_are_fixed_too() -> None:
    assert fixed(Mount("/srv/conf/mcpd.toml", "hide_file")) == ["/srv", "/srv/conf"]


def test_what_is_mounted_already_is_not_fixed_again_and_nothing_above_it_is_missed() -> None:
    got = fixed(Mount("/home/u", "write"), Mount("/home/u/.config/gh", "hide_dir"))
    assert got == ["/home", "/home/u/.config"]


def test_what_the_server_cannot_write_is_not_fixed() -> None:
    # Read-only: renaming there fails already, and a bind would make it writable.
    assert fixed(Mount("/home/u", "read"), Mount("/home/u/.config/gh", "hide_dir")) == ["/home"]
    # Inside what is hidden: a bind would show what the hiding covers.
    assert fixed(Mount("/var/lib/mcpd", "hide_dir"), Mount("/var/lib/mcpd/x/y", "hide_file")) == [
        "/var",
        "/var/lib",
    ]
    # bubblewrap's own /dev, /proc and /sys.
    assert fixed(Mount("/dev/shm/agent.sock", "hide_file")) == []


def test_a_grant_over_a_hidden_path_decides_what_lies_below_it() -> None:
    mounts = (
        Mount("/home/u/.aws", "hide_dir"),
        Mount("/home/u/.aws", "write"),
        Mount("/home/u/.aws/sso/cache", "hide_dir"),
    )
    assert "/home/u/.aws/sso" in fixed(*mounts)


def test_a_strict_sandbox_fixes_only_inside_what_it_may_write() -> None:
    mounts = (
        Mount("/srv/docs", "read"),
        Mount("/srv/docs/a/.env", "hide_file"),
        Mount("/home/u", "write"),
        Mount("/home/u/.config/gh", "hide_dir"),
    )
    # Outside its grants it sees bubblewrap's own empty directories, not the host's.
    assert fixed(*mounts, level="strict") == ["/home/u/.config"]
