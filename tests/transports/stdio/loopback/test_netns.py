"""A server's network namespace made before it starts: its listeners are in it and not
on the host, its namespaces are reachable by path for nsenter, and a helper that fails,
hangs or sends back too little is a SandboxError naming the grant, with nothing left
open. Needs user namespaces (unprivileged or as root); no bubblewrap, no systemd."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from transports.stdio.loopback import netns
from transports.stdio.loopback.netns import HostLoopback, make
from transports.stdio.sandbox.plan import Sandbox, SandboxError

WHERE = "servers.db"


def _namespaces_work() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    done = subprocess.run([unshare, "-Urn", "true"], capture_output=True, check=False)
    return done.returncode == 0


pytestmark = pytest.mark.skipif(
    not _namespaces_work() or shutil.which("nsenter") is None,
    reason="this machine cannot make a user and network namespace, or has no nsenter",
)


def free_ports(count: int) -> list[int]:
    """Ports nobody listens on, on the host's loopback."""
    socks = [socket.socket() for _ in range(count)]
    for sock in socks:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in socks]
    for sock in socks:
        sock.close()
    return ports


def sandbox(*ports: int) -> Sandbox:
    return Sandbox(network=False, loopback=ports, alias="db", where=WHERE)


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.fixture
def made() -> Iterator[list[HostLoopback]]:
    made: list[HostLoopback] = []
    yield made
    for loopback in made:
        loopback.close()


def test_the_listeners_are_in_the_namespace_and_not_on_the_host(
    made: list[HostLoopback],
) -> None:
    ports = free_ports(2)
    loopback = make(sandbox(*ports))
    made.append(loopback)
    assert [port for _, port in loopback.listeners] == ports
    for (sock, port), expected in zip(loopback.listeners, ports, strict=True):
        assert sock.getsockname() == ("127.0.0.1", expected)
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
        assert not sock.get_inheritable()
        # Nobody listens on the host's port: the listener is not there.
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    sock, port = loopback.listeners[1]
    sock.settimeout(30)
    # From inside the namespace the port reaches mcpd's listener.
    connecting = subprocess.Popen(
        [
            "nsenter",
            f"--user={loopback.netns.user}",
            f"--net={loopback.netns.net}",
            "--preserve-credentials",
            "--",
            sys.executable,
            "-I",
            "-c",
            f"import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=5);"
            " print(s.recv(16).decode())",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    conn, _ = sock.accept()
    conn.sendall(b"from mcpd")
    conn.close()
    out, _ = connecting.communicate(timeout=30)
    assert (connecting.returncode, out.strip()) == (0, "from mcpd")


def test_the_namespaces_are_named_by_path_for_nsenter(made: list[HostLoopback]) -> None:
    loopback = make(sandbox(*free_ports(1)))
    made.append(loopback)
    pid = os.getpid()
    user = os.readlink(loopback.netns.user)
    net = os.readlink(loopback.netns.net)
    assert loopback.netns.user.startswith(f"/proc/{pid}/fd/")
    assert user.startswith("user:[") and net.startswith("net:[")
    # Namespaces of their own, not the ones mcpd runs in.
    assert user != os.readlink("/proc/self/ns/user")
    assert net != os.readlink("/proc/self/ns/net")


def test_the_namespace_maps_only_mcpds_own_user(made: list[HostLoopback]) -> None:
    loopback = make(sandbox(*free_ports(1)))
    made.append(loopback)
    done = subprocess.run(
        [
            "nsenter",
            f"--user={loopback.netns.user}",
            f"--net={loopback.netns.net}",
            "--preserve-credentials",
            "--",
            "cat",
            "/proc/self/uid_map",
            "/proc/self/gid_map",
            "/proc/self/setgroups",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    uid_map, gid_map, setgroups = done.stdout.splitlines()
    assert uid_map.split() == [str(os.getuid()), str(os.getuid()), "1"]
    assert gid_map.split() == [str(os.getgid()), str(os.getgid()), "1"]
    assert setgroups == "deny"


def test_closing_lets_go_of_every_descriptor() -> None:
    before = open_fds()
    loopback = make(sandbox(*free_ports(3)))
    assert len(open_fds() - before) == 5
    loopback.close()
    loopback.close()  # twice is harmless
    assert open_fds() == before
    assert all(sock.fileno() == -1 for sock, _ in loopback.listeners)


def test_a_port_granted_twice_fails_by_name_and_leaves_nothing_open() -> None:
    (port,) = free_ports(1)
    before = open_fds()
    with pytest.raises(SandboxError) as info:
        make(sandbox(port, port))
    assert str(info.value) == (
        f"{WHERE}.host_loopback cannot be set up: cannot listen on 127.0.0.1:{port} in it: "
        "Address already in use"
    )
    assert open_fds() == before


def fake_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """Run ``body`` (a shell script) in place of the helper's interpreter."""
    script = tmp_path / "helper"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(script))


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("echo 'first' >&2; echo 'no namespaces here' >&2; exit 3", "no namespaces here"),
        ("exit 4", "its helper exited with 4"),
        ("exit 0", "its listeners did not come back"),
    ],
    ids=["says why", "says nothing", "sends nothing back"],
)
def test_a_helper_that_fails_is_a_sandbox_error_naming_the_grant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, why: str
) -> None:
    fake_helper(tmp_path, monkeypatch, body)
    before = open_fds()
    with pytest.raises(SandboxError) as info:
        make(sandbox(*free_ports(1)))
    assert str(info.value) == f"{WHERE}.host_loopback cannot be set up: {why}"
    assert open_fds() == before


def test_a_helper_that_hangs_is_given_up_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_helper(tmp_path, monkeypatch, "exec tail -f /dev/null")
    monkeypatch.setattr(netns, "_TIMEOUT", 0.2)
    before = open_fds()
    with pytest.raises(SandboxError) as info:
        make(sandbox(*free_ports(1)))
    assert str(info.value).startswith(f"{WHERE}.host_loopback cannot be set up: ")
    assert "timed out after 0.2 seconds" in str(info.value)
    assert open_fds() == before


def test_no_helper_to_run_is_a_sandbox_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "missing"))
    with pytest.raises(SandboxError) as info:
        make(sandbox(*free_ports(1)))
    assert str(info.value).startswith(f"{WHERE}.host_loopback cannot be set up: ")
    assert "No such file or directory" in str(info.value)
