"""A server's sandbox keys as the config is read: sizes in powers of 1024, limits the
kernel can hold, grants that give back nothing the sandbox hides, host loopback ports
each granted once, and the keys an HTTP server has no use for named."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.config.sandboxing.keys import (
    MAX_LIMIT,
    grant_errors,
    limits_errors,
    loopback_port,
    parse_size,
)
from mcpd.config.tables.servertable import LimitsConfig, ServerConfig

STDIO_ONLY = "only applies to stdio servers (with `command`)"


def errors_of(**keys: Any) -> list[tuple[str, str]]:
    server = ServerConfig(**{"command": "/bin/true", **keys})
    return [(e.path, e.message) for e in grant_errors("servers.s", server)]


def limit_errors(**keys: Any) -> list[tuple[str, str]]:
    return [(e.path, e.message) for e in limits_errors("l", LimitsConfig(**keys))]


@pytest.mark.parametrize(
    ("written", "size"),
    [
        (0, 0),
        (4096, 4096),
        ("512", 512),
        ("512M", 512 << 20),
        ("2G", 2 << 30),
        ("2GiB", 2 << 30),
        ("2gb", 2 << 30),
        (" 1.5 K ", 1536),
        ("1T", 1 << 40),
    ],
)
def test_a_size_is_bytes_or_a_number_with_a_unit_of_1024s(written: int | str, size: int) -> None:
    assert parse_size(written) == size


@pytest.mark.parametrize("written", ["", "M", "2X", "-1G", "1e3", "2 G B", "½G"])
def test_what_is_not_a_size_is_refused_showing_it(written: str) -> None:
    with pytest.raises(ValueError, match="is not a size") as info:
        parse_size(written)
    assert repr(written) in str(info.value)


def test_a_size_past_what_the_kernel_holds_is_refused() -> None:
    assert parse_size(MAX_LIMIT) == MAX_LIMIT
    for too_big in (MAX_LIMIT + 1, -1):
        with pytest.raises(ValueError, match="number of bytes, at most"):
            parse_size(too_big)
    with pytest.raises(ValueError, match=f"must be at most {MAX_LIMIT} bytes"):
        parse_size("9000000T")


def test_memory_is_no_limit_or_enough_to_start_a_server() -> None:
    assert limit_errors(memory=0) == []
    assert limit_errors(memory="16M") == []
    assert limit_errors(memory="15M") == [("l.memory", "must be 0 (no limit) or at least 16M")]
    (path, message), *_ = limit_errors(memory="lots")
    assert path == "l.memory" and "is not a size" in message


def test_counts_are_no_limit_or_positive_and_open_files_enough_to_run() -> None:
    assert limit_errors(processes=0, open_files=0, cpu=0) == []
    assert limit_errors(processes=1, open_files=16, cpu=1) == []
    negative = "must be 0 (no limit) or positive, at most"
    found = limit_errors(processes=-1, cpu=MAX_LIMIT + 1)
    assert [p for p, _ in found] == ["l.processes", "l.cpu"]
    assert all(m.startswith(negative) for _, m in found)
    assert limit_errors(open_files=15) == [("l.open_files", "must be 0 (no limit) or at least 16")]


def test_an_http_server_is_told_which_sandbox_keys_it_has_no_use_for() -> None:
    server = ServerConfig(
        url="https://mcp.example.com/mcp",
        sandbox="strict",
        read=["/srv"],
        network=False,
        limits=LimitsConfig(cpu=5),
    )
    found = [(e.path, e.message) for e in grant_errors("servers.s", server)]
    assert found == [
        ("servers.s.sandbox", STDIO_ONLY),
        ("servers.s.read", STDIO_ONLY),
        ("servers.s.network", STDIO_ONLY),
        ("servers.s.limits", STDIO_ONLY),
    ]
    assert [e.path for e in grant_errors("servers.s", ServerConfig(url="https://x/"))] == []


@pytest.mark.parametrize("path", ["/", "//", "/./", "~", "~/", "~/.", "/srv/.."])
def test_a_grant_of_everything_the_sandbox_hides_is_refused(path: str) -> None:
    assert errors_of(write=["/srv/data", path]) == [
        ("servers.s.write[1]", "would give back everything the sandbox hides")
    ]


@pytest.mark.parametrize("path", ["srv", "./data", "~user/x", ""])
def test_a_grant_is_an_absolute_path_or_under_home(path: str) -> None:
    assert errors_of(read=[path]) == [("servers.s.read[0]", "must be an absolute path (or ~/...)")]


def test_grants_under_home_and_elsewhere_pass() -> None:
    assert errors_of(read=["~/notes", "/usr/share/dict"], write=["/tmp/out"]) == []


def test_inherited_variables_are_names_or_prefix_patterns() -> None:
    assert errors_of(inherit_env=["HOME", "LC_*", "_X1"]) == []
    assert errors_of(inherit_env=["LC_*", "A-B", "*", "1X"]) == [
        ("servers.s.inherit_env[1]", 'must be a variable name or a "PREFIX_*" pattern'),
        ("servers.s.inherit_env[2]", 'must be a variable name or a "PREFIX_*" pattern'),
        ("servers.s.inherit_env[3]", 'must be a variable name or a "PREFIX_*" pattern'),
    ]


def test_a_server_limit_is_named_under_its_table() -> None:
    assert errors_of(limits=LimitsConfig(open_files=3)) == [
        ("servers.s.limits.open_files", "must be 0 (no limit) or at least 16")
    ]


@pytest.mark.parametrize(("written", "port"), [(5432, 5432), ("127.0.0.1:5432", 5432), (1, 1)])
def test_a_loopback_port_is_a_port_or_one_on_127_0_0_1(written: int | str, port: int) -> None:
    assert loopback_port(written) == port


@pytest.mark.parametrize(
    ("written", "says"),
    [
        ("localhost:5432", "is not a host loopback port"),
        ("10.0.0.1:5432", "is not a host loopback port"),
        ("5432", "is not a host loopback port"),
        (0, "a port is a number from 1 to 65535"),
        (65536, "a port is a number from 1 to 65535"),
        ("127.0.0.1:http", "a port is a number from 1 to 65535"),
        ("127.0.0.1:٥٤٣٢", "a port is a number from 1 to 65535"),
    ],
)
def test_what_is_not_a_loopback_port_is_refused(written: int | str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        loopback_port(written)


def test_loopback_grants_need_the_network_off_and_each_port_once() -> None:
    needs = "needs network = false (with a network the host's loopback is reachable already)"
    assert errors_of(host_loopback=[5432]) == [("servers.s.host_loopback", needs)]
    assert errors_of(network=False, host_loopback=[5432, "127.0.0.1:6379"]) == []
    assert errors_of(network=False, host_loopback=[5432, "127.0.0.1:5432", "x"]) == [
        ("servers.s.host_loopback[1]", "port 5432 is granted twice"),
        (
            "servers.s.host_loopback[2]",
            "'x' is not a host loopback port (5432 or \"127.0.0.1:5432\")",
        ),
    ]
