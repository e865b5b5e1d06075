"""What mcpd listens on, bound before any server starts: each part handed once to what
serves it, what nobody took closed with its socket file, and a place mcpd cannot bind
refused naming its key, with nothing left bound behind it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Config
from mcpd.starting.cannot_start import DaemonError
from mcpd.starting.listening import EndpointAddress, Listening, bind_endpoint, bind_plan


def config(tmp: Path, **daemon: Any) -> Config:
    return parse_config(
        {
            "daemon": {"socket": str(tmp / "mcpd.sock"), **daemon},
            "servers": {"s": {"command": "true"}},
            "profiles": {"mail": {"socket": str(tmp / "mail.sock")}},
        },
        env={},
    )


@pytest.fixture
def held() -> Iterator[list[socket.socket]]:
    """Sockets a test holds as another program would: closed at the end."""
    socks: list[socket.socket] = []
    yield socks
    for sock in socks:
        sock.close()


def listening_unix(path: Path, held: list[socket.socket]) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    held.append(sock)
    sock.bind(str(path))
    sock.listen()


def answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def test_every_place_is_bound_and_listening_before_anything_serves_it(tmp_path: Path) -> None:
    listening = Listening()
    listening.bind(config(tmp_path, http_listen="127.0.0.1:0"), str(tmp_path / "mcpd.sock"))
    try:
        assert answers(tmp_path / "mcpd.sock") and answers(tmp_path / "mail.sock")
        assert os.stat(tmp_path / "mail.sock").st_mode & 0o777 == 0o600
        (endpoint,) = listening.http
        socket.create_connection(endpoint.getsockname(), timeout=5).close()
    finally:
        listening.close()


def test_each_part_is_handed_over_once_and_close_leaves_what_was_taken(tmp_path: Path) -> None:
    listening = Listening()
    listening.bind(config(tmp_path, http_listen="127.0.0.1:0"), str(tmp_path / "mcpd.sock"))
    socket_part = listening.take_socket()
    http = listening.take_http()
    assert socket_part is not None
    try:
        assert listening.take_socket() is None
        assert len(http) == 1 and listening.take_http() == []
        listening.close()
        listening.close()  # again: nothing more to do
        # What was taken is its taker's: still listening, its file in place.
        assert answers(tmp_path / "mcpd.sock")
        socket.create_connection(http[0].getsockname(), timeout=5).close()
        # What nobody took is closed and its file gone.
        assert not (tmp_path / "mail.sock").exists()
        assert listening.take_profiles() == {}
    finally:
        socket_part.close()
        for sock in http:
            sock.close()
    assert not (tmp_path / "mcpd.sock").exists()


def test_without_a_socket_path_the_agents_socket_is_left_to_systemd(tmp_path: Path) -> None:
    listening = Listening()
    listening.bind(config(tmp_path), None)
    try:
        assert listening.socket is None and not (tmp_path / "mcpd.sock").exists()
        assert list(listening.profiles) == ["mail"] and listening.http == []
    finally:
        listening.close()


def test_a_profile_socket_another_program_listens_on_is_refused_naming_the_profile(
    tmp_path: Path, held: list[socket.socket]
) -> None:
    listening_unix(tmp_path / "mail.sock", held)
    listening = Listening()
    with pytest.raises(DaemonError, match=r"^profiles\.mail\.socket: something already listens"):
        listening.bind(config(tmp_path), str(tmp_path / "mcpd.sock"))
    # The agents' socket bound before it is closed and gone, the other program's kept.
    assert listening.socket is None and not (tmp_path / "mcpd.sock").exists()
    assert answers(tmp_path / "mail.sock")


def test_an_endpoint_port_taken_is_refused_naming_the_key_and_nothing_stays_bound(
    tmp_path: Path, held: list[socket.socket]
) -> None:
    squatter = socket.socket()
    held.append(squatter)
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    listen = f"127.0.0.1:{squatter.getsockname()[1]}"
    listening = Listening()
    with pytest.raises(DaemonError) as refused:
        listening.bind(config(tmp_path, http_listen=listen), str(tmp_path / "mcpd.sock"))
    assert str(refused.value).startswith(f"daemon.http_listen: cannot listen on {listen}: ")
    assert "in use" in str(refused.value)
    assert not (tmp_path / "mcpd.sock").exists() and not (tmp_path / "mail.sock").exists()
    assert listening.socket is None and listening.profiles == {} and listening.http == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory away")
def test_a_socket_directory_another_user_holds_is_refused_naming_the_path(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 4242, 4242)
    listening = Listening()
    with pytest.raises(DaemonError, match=f"will not listen on {theirs / 'mcpd.sock'}"):
        listening.bind(config(tmp_path), str(theirs / "mcpd.sock"))
    assert list(theirs.iterdir()) == []


def test_an_endpoint_on_localhost_listens_on_both_loopback_addresses_on_one_port() -> None:
    bound = bind_endpoint("localhost:0")
    try:
        held = {sock.getsockname()[0] for sock in bound}
        assert held == {"127.0.0.1", "::1"} or (held == {"127.0.0.1"} and not socket.has_ipv6)
        assert len({sock.getsockname()[1] for sock in bound}) == 1
    finally:
        for sock in bound:
            sock.close()


def resolver(answers: dict[str, list[str]]) -> Callable[[str], list[str]]:
    def resolve(host: str) -> list[str]:
        return answers[host]

    return resolve


NOTHING = resolver({})


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "0.0.0.0", "::", "10.0.0.5", "fe80::1%lo"])
def test_a_literal_address_is_bound_alone_unresolved(host: str) -> None:
    assert bind_plan(host, NOTHING) == [EndpointAddress(host)]


@pytest.mark.parametrize("host", ["localhost", "LocalHost"])
def test_localhost_is_both_loopback_addresses_whatever_the_resolver_says(host: str) -> None:
    """An /etc/hosts that gives 127.0.0.1 alone leaves ::1 all the same: browsers go
    there for localhost on their own. ::1 is left out only where the machine has none."""
    assert bind_plan(host, NOTHING) == [
        EndpointAddress("127.0.0.1"),
        EndpointAddress("::1", absent_ok=True),
    ]


def test_another_name_for_loopback_is_refused_asking_for_the_address_or_localhost() -> None:
    resolve = resolver(
        {"box": ["127.0.1.1"], "ip6-localhost": ["::1"], "both": ["10.0.0.5", "::1"]}
    )
    for name, address in (("box", "127.0.1.1"), ("ip6-localhost", "::1"), ("both", "::1")):
        with pytest.raises(DaemonError) as refused:
            bind_plan(name, resolve)
        said = str(refused.value)
        assert said.startswith(
            f"daemon.http_listen: {name!r} is a name for the loopback address {address}"
        )
        assert '"127.0.0.1:PORT"' in said and "or localhost" in said


def test_another_name_is_bound_on_each_of_its_addresses_once() -> None:
    resolve = resolver({"lan": ["10.0.0.5", "fd00::5", "10.0.0.5"]})
    assert bind_plan("lan", resolve) == [EndpointAddress("10.0.0.5"), EndpointAddress("fd00::5")]


def test_a_name_that_does_not_resolve_is_refused_naming_the_key() -> None:
    with pytest.raises(
        DaemonError, match=r"^daemon\.http_listen: cannot listen on nowhere\.invalid:80: "
    ):
        bind_endpoint("nowhere.invalid:80")


# In a network namespace of its own whose loopback has IPv6 turned off.
WITHOUT_IPV6 = """
import subprocess, sys
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
with open("/proc/sys/net/ipv6/conf/lo/disable_ipv6", "w") as switch:
    switch.write("1")
from mcpd.starting.listening import bind_endpoint
from mcpd.agents.http.tcp import own_names
bound = bind_endpoint("localhost:0")
print(sorted(str(s.getsockname()[0]) for s in bound), sorted(own_names("localhost", bound)))
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"),
    reason="needs root, unshare and ip to make a network namespace without IPv6",
)
def test_localhost_on_a_machine_without_ipv6_is_127_0_0_1_alone_and_keeps_its_name() -> None:
    """Where the machine has no ::1, nobody can listen there either: mcpd starts on
    127.0.0.1 and answers to localhost."""
    run = subprocess.run(
        ["unshare", "--net", sys.executable, "-c", WITHOUT_IPV6],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[3],
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[0] == "['127.0.0.1'] ['127.0.0.1', 'localhost']"
