"""A host loopback grant as a plan: bubblewrap joins the namespace made for it (through
nsenter) instead of making one, and a machine that cannot do that fails the start by
name. No process is started here."""

from __future__ import annotations

import msgspec
import pytest

from transports.stdio.sandbox.machine import Machine
from transports.stdio.sandbox.plan import Netns, Resolved, Sandbox, SandboxError, plan

MACHINE = Machine(
    bwrap="/usr/bin/bwrap",
    nsenter="/usr/bin/nsenter",
    namespaces=None,
    network=None,
    userns_denial=None,
    keyring_denial=None,
)
NETNS = Netns("/proc/7/fd/4", "/proc/7/fd/5")


def resolved(**kw: object) -> Resolved:
    sandbox = Sandbox(home="/h", where="servers.db", **kw)  # type: ignore[arg-type]
    return Resolved(sandbox=sandbox, home="/h", mounts=(), command="/usr/bin/psql-mcp")


def test_a_granted_server_joins_its_namespace_instead_of_making_one() -> None:
    argv = plan(resolved(network=False, loopback=(5432,)), ["psql-mcp"], MACHINE, "/h", NETNS).argv
    assert argv[:5] == [
        "/usr/bin/nsenter",
        "--user=/proc/7/fd/4",
        "--net=/proc/7/fd/5",
        "--preserve-credentials",
        "--",
    ]
    assert argv[5] == "/usr/bin/bwrap"
    assert "--unshare-net" not in argv
    assert argv[-1] == "/usr/bin/psql-mcp"
    # Without a grant: a namespace of bubblewrap's own, and no nsenter.
    argv = plan(resolved(network=False), ["psql-mcp"], MACHINE, "/h").argv
    assert argv[0] == "/usr/bin/bwrap" and "--unshare-net" in argv


def test_a_grant_that_cannot_be_set_up_fails_the_start_by_name() -> None:
    no_nsenter = msgspec.structs.replace(MACHINE, nsenter=None)
    with pytest.raises(SandboxError) as info:
        plan(resolved(network=False, loopback=(5432,)), ["x"], no_nsenter, "/h", NETNS)
    assert "servers.db.host_loopback" in str(info.value)
    assert "nsenter (util-linux) is not installed" in str(info.value)
    with pytest.raises(SandboxError, match=r"servers\.db\.host_loopback"):
        plan(resolved(network=False, loopback=(5432,)), ["x"], MACHINE, "/h")
    with pytest.raises(SandboxError, match=r"needs servers\.db\.network = false"):
        plan(resolved(loopback=(5432,)), ["x"], MACHINE, "/h", NETNS)
    with pytest.raises(SandboxError, match="needs a sandbox"):
        plan(resolved(level="off", network=False, loopback=(5432,)), ["x"], MACHINE, "/h")


def test_through_nsenter_only_bubblewraps_own_arguments_are_handed_apart() -> None:
    p = plan(resolved(network=False, loopback=(5432,)), ["psql-mcp"], MACHINE, "/h", NETNS)
    assert p.sandbox_args is not None
    first, last = p.sandbox_args
    assert p.argv[first - 1] == "/usr/bin/bwrap" and p.argv[last:] == ["--", "/usr/bin/psql-mcp"]
    assert "--unshare-user" in p.argv[first:last] and "/h" in p.argv[first:last]
