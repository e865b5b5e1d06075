"""The filesystems a sandbox keeps in memory, as a plan: ``/dev/shm`` (and a strict
sandbox's ``/tmp``) sized at the server's memory limit, the others (``/dev``, the
covers of hidden directories, a strict sandbox's root) made read-only after every
mount, and a machine whose bubblewrap cannot size a tmpfs said so. No process is
started here."""

from __future__ import annotations

import msgspec

from transports.stdio.sandbox.limits import Limits
from transports.stdio.sandbox.machine import Machine, SystemPath
from transports.stdio.sandbox.plan import (
    Level,
    Mount,
    Plan,
    Resolved,
    Sandbox,
    plan,
)

MACHINE = Machine(
    bwrap="/usr/bin/bwrap",
    prlimit="/usr/bin/prlimit",
    namespaces=None,
    network=None,
    system=(SystemPath("/usr"), SystemPath("/bin", "usr/bin"), SystemPath("/etc")),
    userns_denial=None,
    keyring_denial=None,
    tmpfs_unsized=None,
)
OLD = msgspec.structs.replace(MACHINE, tmpfs_unsized="bwrap: Unknown option --size")
HOME = "/var/lib/mcpd/homes/files"
LIMITS = Limits(memory=256 << 20, keys={"memory": "servers.files.limits.memory"})
# Operands of the options that mount, link or seal something, and of the modifiers of
# the next one (--size, --perms).
OPERANDS = {
    "--bind": 2,
    "--ro-bind": 2,
    "--ro-bind-try": 2,
    "--symlink": 2,
    "--tmpfs": 1,
    "--dev": 1,
    "--proc": 1,
    "--remount-ro": 1,
    "--size": 1,
    "--perms": 1,
    "--chdir": 1,
    "--cap-drop": 1,
}


def ops(argv: list[str]) -> list[tuple[str, ...]]:
    """bubblewrap's options in order, each with its operands, up to its ``--``."""
    out: list[tuple[str, ...]] = []
    i = argv.index("/usr/bin/bwrap") + 1
    while argv[i] != "--":
        n = OPERANDS.get(argv[i], 0)
        out.append(tuple(argv[i : i + n + 1]))
        i += n + 1
    return out


def planned(
    level: Level,
    mounts: tuple[Mount, ...] = (),
    limits: Limits = LIMITS,
    machine: Machine = MACHINE,
) -> Plan:
    sandbox = Sandbox(home=HOME, where="servers.files", level=level, limits=limits)
    r = Resolved(sandbox=sandbox, home=HOME, mounts=mounts, command="/usr/bin/node")
    return plan(r, ["node"], machine, HOME)


def sized(found: list[tuple[str, ...]], path: str) -> str | None:
    """The --size of the tmpfs at ``path`` (None: unsized); asserts there is one."""
    at = found.index(("--tmpfs", path))
    return found[at - 1][1] if found[at - 1][0] == "--size" else None


def test_dev_shm_holds_no_more_than_the_memory_limit_at_every_sandboxed_level() -> None:
    for level in ("default", "strict"):
        found = ops(planned(level).argv)
        # A tmpfs of its own on the directory bubblewrap's /dev has for it.
        assert found.index(("--tmpfs", "/dev/shm")) > found.index(("--dev", "/dev")), level
        assert sized(found, "/dev/shm") == str(256 << 20), level
    strict = ops(planned("strict").argv)
    assert sized(strict, "/tmp") == str(256 << 20)
    # The default level's /tmp is the host's, which the server writes as its user may.
    assert ("--tmpfs", "/tmp") not in ops(planned("default").argv)


def test_without_a_memory_limit_no_bound_is_set_and_none_is_said_missing() -> None:
    for machine in (MACHINE, OLD):
        p = planned("strict", limits=Limits(), machine=machine)
        found = ops(p.argv)
        assert sized(found, "/dev/shm") is None and sized(found, "/tmp") is None
        assert p.unprotected is None


def test_the_rest_is_made_read_only_after_every_mount() -> None:
    mounts = (
        Mount("/var/lib/mcpd", "hide_dir"),
        Mount("/home/u/.aws", "hide_dir"),
        Mount("/home/u/.aws", "write"),  # a grant on top: it stays writable
        Mount("/home/u/.netrc", "hide_file"),
        Mount("/srv/notes", "read", "/home/u/notes"),
    )
    for level, shown in (("default", ["/var/lib/mcpd"]), ("strict", ["/"])):
        found = ops(planned(level, mounts).argv)  # type: ignore[arg-type]
        seals = [op[1] for op in found if op[0] == "--remount-ro"]
        assert seals == ["/dev", *shown], level
        # Last but for the working directory: no mount point can be made in them after.
        assert found[-1] == ("--chdir", HOME)
        assert all(op[0] == "--remount-ro" for op in found[-1 - len(seals) : -1]), level


def test_a_bubblewrap_that_cannot_size_a_tmpfs_leaves_them_unbounded_and_says_so() -> None:
    for level, places in (("default", "/dev/shm"), ("strict", "/dev/shm and /tmp")):
        p = planned(level, machine=OLD)  # type: ignore[arg-type]
        found = ops(p.argv)
        assert sized(found, "/dev/shm") is None
        # Still sealed: that needs no --size.
        assert ("--remount-ro", "/dev") in found
        assert p.wrapped and p.unprotected == (
            f"what it writes to {places} is memory that servers.files.limits.memory does "
            "not count, up to half of the machine's: bubblewrap cannot bound a tmpfs "
            "(--size): bwrap: Unknown option --size"
        )
