"""A sandboxed server's Landlock domain: the ruleset it asks for, what is said of a
kernel that cannot scope, how the plan starts a server in it (from the domain's
thread at every sandboxed level, through a step after nsenter for one that joins a
network namespace, not at all without a sandbox), and what the step does when it
cannot run the rest. The domain is only ever entered by a child or by the thread made
for it: never by the test's own thread."""

from __future__ import annotations

import logging
import struct
import subprocess
import sys

import pytest

from transports.stdio.process import lifecycle
from transports.stdio.sandbox import host, landlock
from transports.stdio.sandbox.machine import Machine, SystemPath
from transports.stdio.sandbox.plan import Netns, Resolved, Sandbox, plan

STEP = ("/usr/bin/python3", "-I", "-S", "/opt/mcpd/transports/stdio/sandbox/landlock.py")
MACHINE = Machine(
    bwrap="/usr/bin/bwrap",
    nsenter="/usr/bin/nsenter",
    namespaces=None,
    system=(SystemPath("/usr"),),
    network=None,
    confine=STEP,
    scoping=None,
    userns_denial=None,
    keyring_denial=None,
)
HOME = "/var/lib/mcpd/homes/files"


def resolved(**kw: object) -> Resolved:
    sandbox = Sandbox(home=HOME, where="servers.files", **kw)  # type: ignore[arg-type]
    return Resolved(sandbox=sandbox, home=HOME, mounts=(), command="/usr/bin/node")


def test_the_ruleset_handles_no_access_and_scopes_abstract_sockets_and_signals() -> None:
    attr = landlock.ruleset_attr(landlock.SCOPE_ABSTRACT_UNIX_SOCKET | landlock.SCOPE_SIGNAL)
    assert len(attr) == 24
    fs, net, scoped = struct.unpack("=QQQ", attr)
    assert (fs, net, scoped) == (0, 0, 3)


@pytest.mark.parametrize(
    ("version", "words"),
    [(1, "ABI 1; scoping needs ABI 6 (Linux 6.12)"), (5, "ABI 5; scoping needs ABI 6")],
)
def test_a_kernel_before_abi_6_is_said_to_leave_abstract_sockets_open(
    monkeypatch: pytest.MonkeyPatch, version: int, words: str
) -> None:
    monkeypatch.setattr(landlock, "abi", lambda: version)
    why = landlock.scoping()
    assert why is not None and words in why


@pytest.mark.parametrize("version", [6, 7])
def test_abi_6_and_later_scope(monkeypatch: pytest.MonkeyPatch, version: int) -> None:
    monkeypatch.setattr(landlock, "abi", lambda: version)
    assert landlock.scoping() is None


def test_a_kernel_without_landlock_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused() -> int:
        raise landlock.Unavailable("Landlock is disabled at boot")

    monkeypatch.setattr(landlock, "abi", refused)
    assert landlock.scoping() == "Landlock is disabled at boot"


@pytest.mark.parametrize("level", ["default", "strict"])
def test_every_sandboxed_level_starts_bubblewrap_in_the_domain(level: str) -> None:
    """From the thread in the domain, so that bubblewrap is born in it: no step, no
    interpreter started for each server."""
    p = plan(resolved(level=level), ["node"], MACHINE, HOME)
    assert p.starter == "confined"
    assert p.argv[0] == "/usr/bin/bwrap" and STEP[-1] not in p.argv


def test_a_server_joins_its_network_namespace_before_the_domain() -> None:
    """nsenter opens mcpd's descriptors through /proc, which a process in the domain
    may not, as it may not trace mcpd; bubblewrap still starts in the domain."""
    netns = Netns("/proc/1/fd/3", "/proc/1/fd/4")
    r = resolved(network=False, loopback=(5432,))
    p = plan(r, ["node"], MACHINE, HOME, netns)
    assert p.argv[0] == "/usr/bin/nsenter"
    step = p.argv.index(STEP[0])
    assert p.argv[step - 1] == "--"
    assert p.argv[step : step + len(STEP) + 1] == [*STEP, "/usr/bin/bwrap"]
    # nsenter itself starts outside it, from the thread under the keyring filter alone.
    assert p.starter == "keyless"


def test_without_a_sandbox_there_is_no_domain() -> None:
    p = plan(resolved(level="off"), ["node"], MACHINE, HOME)
    assert p.argv == ["/usr/bin/node"] and p.starter == "main"
    unsandboxed = Machine(bwrap=None, confine=STEP, scoping=None)
    p = plan(resolved(), ["node"], unsandboxed, HOME)
    assert p.argv == ["/usr/bin/node"] and p.unprotected is not None and p.starter == "main"


def test_a_kernel_that_cannot_scope_still_starts_the_server_in_bubblewrap() -> None:
    machine = Machine(
        bwrap="/usr/bin/bwrap",
        namespaces=None,
        scoping="ABI 4",
        userns_denial=None,
        keyring_denial=None,
    )
    p = plan(resolved(), ["node"], machine, HOME)
    assert p.argv[0] == "/usr/bin/bwrap" and p.unprotected is None
    assert p.starter == "keyless"


def test_the_step_says_what_it_could_not_run() -> None:
    if landlock.scoping() is not None:
        pytest.skip(f"no Landlock scoping here: {landlock.scoping()}")
    done = subprocess.run(
        [sys.executable, "-I", "-S", landlock.__file__, "/no/such/command"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == landlock.FAILED
    assert "mcpd: cannot run /no/such/command: No such file or directory" in done.stderr


def test_a_kernel_that_cannot_scope_is_said_once_in_the_log(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    why = "the kernel's Landlock is ABI 4; scoping needs ABI 6 (Linux 6.12)"
    machine = Machine(bwrap="/usr/bin/bwrap", namespaces=None, scoping=why)
    monkeypatch.setattr(host, "_machine", [machine])
    monkeypatch.setattr(lifecycle, "_said_unscoped", [])
    with caplog.at_level(logging.WARNING, logger="mcpd.stdio"):
        for _ in range(3):
            lifecycle._say_unscoped()
    (record,) = caplog.records
    assert "abstract Unix sockets" in record.getMessage() and why in record.getMessage()
