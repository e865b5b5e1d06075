from __future__ import annotations

import ipaddress

import pytest

from protocol.oauth import BlockedUrl, FetchPolicy
from protocol.oauth.ssrf import classify, is_loopback_host


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("8.8.8.8", "global"),
        ("127.0.0.1", "loopback"),
        ("127.9.9.9", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.32.0.1", "global"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "shared"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("fd00::1", "unique-local"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("255.255.255.255", "reserved"),
        ("192.0.2.7", "reserved"),
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:127.0.0.1", "loopback"),
        ("64:ff9b::a9fe:a9fe", "link-local"),
        ("2002:0a00:0001::1", "private"),
        ("2606:4700::1111", "global"),
    ],
)
def test_classify(address: str, kind: str) -> None:
    assert classify(address) == kind


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("LOCALHOST.", True),
        ("app.localhost", True),
        ("127.0.0.1", True),
        ("[::1]", True),
        ("localhost.example.com", False),
        ("10.0.0.1", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def test_a_remote_server_gets_the_strict_policy() -> None:
    policy = FetchPolicy.for_server("https://mcp.example.com/mcp", ["93.184.216.34"])
    assert not (policy.allow_loopback or policy.allow_private or policy.allow_link_local)
    policy.check_url("https://auth.example.com/token", "token request")
    for url, why in [
        ("http://auth.example.com/token", "https"),
        ("ftp://auth.example.com/x", "http"),
        ("http://localhost:8080/admin", "loopback"),
        ("https://127.0.0.1/x", "loopback"),
        ("https://169.254.169.254/latest/meta-data", "link-local"),
        ("https://10.0.0.5/token", "private"),
        ("https://[fd00::1]/token", "unique-local"),
        ("https://0.0.0.0/", "unspecified"),
    ]:
        with pytest.raises(BlockedUrl, match=why):
            policy.check_url(url, "token request")


def test_resolved_addresses_are_all_checked() -> None:
    policy = FetchPolicy()
    assert policy.check_addresses("https://as.example/t", ["93.184.216.34"], "x") == [
        "93.184.216.34"
    ]
    with pytest.raises(BlockedUrl, match=r"10\.0\.0\.1, a private address"):
        policy.check_addresses("https://as.example/t", ["93.184.216.34", "10.0.0.1"], "x")
    with pytest.raises(BlockedUrl, match="loopback"):
        policy.check_addresses("https://rebind.example/t", ["127.0.0.1"], "x")
    with pytest.raises(BlockedUrl, match="did not resolve"):
        policy.check_addresses("https://as.example/t", [], "x")


def test_a_local_development_server_may_use_local_addresses() -> None:
    policy = FetchPolicy.for_server("http://localhost:3000/mcp", ["127.0.0.1", "::1"])
    assert policy.allow_loopback and policy.allow_private and not policy.allow_link_local
    policy.check_url("http://localhost:4000/token", "token request")
    policy.check_addresses("https://as.lan/token", ["192.168.1.20"], "token request")
    with pytest.raises(BlockedUrl, match="link-local"):
        policy.check_addresses("https://as.lan/token", ["169.254.169.254"], "token request")
    # a loopback name must really be loopback
    with pytest.raises(BlockedUrl, match="not loopback"):
        policy.check_addresses("http://localhost:4000/token", ["10.0.0.1"], "token request")
    # plain http is for loopback only
    with pytest.raises(BlockedUrl, match="https"):
        policy.check_url("http://as.lan/token", "token request")


def test_a_server_on_the_lan_may_use_the_lan_but_not_this_machine() -> None:
    policy = FetchPolicy.for_server("https://10.0.0.7:8000/mcp", ["10.0.0.7"])
    assert policy.allow_private and not policy.allow_loopback
    policy.check_url("https://10.0.0.7:8000/.well-known/oauth-protected-resource", "prm")
    policy.check_addresses("https://auth.corp/t", ["10.0.0.9"], "x")
    with pytest.raises(BlockedUrl, match="loopback"):
        policy.check_url("http://127.0.0.1:9000/t", "x")


@pytest.mark.parametrize("server", ["http://10.0.0.7:8000/mcp", "http://mcp.example.com/mcp"])
def test_plain_http_is_refused_off_loopback_even_on_the_servers_own_origin(server: str) -> None:
    """Over plain http the client secret and the tokens would cross the network in
    clear: the server's own URL being http grants its OAuth nothing."""
    policy = FetchPolicy.for_server(server, ["10.0.0.7"])
    origin = server.removesuffix("/mcp")
    with pytest.raises(BlockedUrl, match="must use https") as caught:
        policy.check_url(f"{origin}/token", "token request")
    assert f"{origin}/token" in str(caught.value)
    assert "loopback only" in str(caught.value)
    loopback = FetchPolicy.for_server("http://127.0.0.1:8000/mcp", ["127.0.0.1"])
    loopback.check_url("http://127.0.0.1:8000/token", "token request")


@pytest.mark.parametrize(
    ("addresses", "loopback", "private", "link_local"),
    [
        (["127.0.0.1"], True, True, False),
        (["127.0.0.1", "::1"], True, True, False),
        (["10.0.0.7", "fd00::7"], False, True, False),
        (["169.254.1.1"], False, False, True),
        # one public address makes the server a remote one, whatever else its name says
        (["8.8.4.4", "127.0.0.1"], False, False, False),
        (["127.0.0.1", "2606:4700::1111"], False, False, False),
        (["8.8.4.4", "10.0.0.7"], False, False, False),
        (["8.8.4.4", "169.254.169.254"], False, False, False),
        # on this machine and on the LAN: the LAN, which both may reach
        (["127.0.0.1", "10.0.0.7"], False, True, False),
        (["10.0.0.7", "169.254.1.1"], False, False, False),
        ([], False, False, False),
    ],
)
def test_a_server_gets_only_what_every_one_of_its_addresses_would_get(
    addresses: list[str], loopback: bool, private: bool, link_local: bool
) -> None:
    policy = FetchPolicy.for_server("http://mcp.example:8080/mcp", addresses)
    granted = (policy.allow_loopback, policy.allow_private, policy.allow_link_local)
    assert granted == (loopback, private, link_local)


def test_a_name_on_public_and_loopback_addresses_is_refused_loopback_and_told_why() -> None:
    policy = FetchPolicy.for_server("http://evil.example:8080/mcp", ["8.8.4.4", "127.0.0.1"])
    url = "http://127.0.0.1:24190/internal/admin?action=wipe"
    with pytest.raises(BlockedUrl) as caught:
        policy.check_url(url, "resource metadata")
    said = str(caught.value)
    assert "evil.example resolves to both public and loopback addresses" in said
    assert "action=wipe" not in said
    with pytest.raises(BlockedUrl, match="resolves to both public and loopback"):
        policy.check_addresses("https://as.example/register", ["127.0.0.1"], "registration")


def test_a_local_servers_name_must_stay_local_for_what_it_was_granted() -> None:
    policy = FetchPolicy.for_server("https://mcp.test:8080/mcp", ["127.0.0.1"])
    prm = "https://mcp.test:8080/.well-known/oauth-protected-resource/mcp"
    assert policy.check_addresses(prm, ["127.0.0.1"], "resource metadata") == ["127.0.0.1"]
    with pytest.raises(BlockedUrl) as caught:
        policy.check_addresses(prm, ["93.184.216.34"], "resource metadata")
    said = str(caught.value)
    assert "mcp.test resolved to loopback addresses alone" in said
    assert "now to 93.184.216.34, a public address" in said
    # a public server's name may resolve to other public addresses
    remote = FetchPolicy.for_server("https://mcp.example.com/mcp", ["93.184.216.34"])
    remote.check_addresses("https://mcp.example.com/x", ["93.184.216.35"], "x")


def _v4_in_v6_forms(v4: str) -> list[str]:
    """Every way an IPv6 address carries ``v4``: IPv4-compatible, mapped, translated,
    NAT64 (well-known prefix, local-use prefix in the RFC 6052 layouts), 6to4, Teredo."""
    a = int(ipaddress.IPv4Address(v4))
    hi, lo = a >> 16, a & 0xFFFF
    local = 0x0064FF9B0001 << 80  # 64:ff9b:1::/48
    b = a.to_bytes(4, "big")
    layouts = [
        local | a,  # /96
        local | (a << 24),  # /64: after the u octet
        local | (b[0] << 64) | (int.from_bytes(b[1:], "big") << 32),  # /56
        local | (hi << 64) | (lo << 40),  # /48
    ]
    teredo = (
        (0x20010000 << 96) | (int(ipaddress.IPv4Address("192.0.2.45")) << 64) | (a ^ 0xFFFFFFFF)
    )
    return [
        f"::{v4}",
        f"::ffff:{v4}",
        f"::ffff:0:{v4}",
        f"64:ff9b::{v4}",
        *(str(ipaddress.IPv6Address(x)) for x in layouts),
        f"2002:{hi:x}:{lo:x}::1",
        str(ipaddress.IPv6Address(teredo)),
    ]


@pytest.mark.parametrize(
    ("v4", "kind"),
    [("169.254.169.254", "link-local"), ("127.0.0.1", "loopback"), ("10.0.0.1", "private")],
)
def test_ipv4_carried_in_ipv6_is_judged_by_the_ipv4_address(v4: str, kind: str) -> None:
    for address in _v4_in_v6_forms(v4):
        assert (address, classify(address)) == (address, kind)
    with pytest.raises(BlockedUrl, match=kind):
        FetchPolicy.for_server("https://mcp.example.com/mcp", ["8.8.8.8"]).check_url(
            f"https://[{_v4_in_v6_forms(v4)[0]}]/token", "token endpoint"
        )


def test_ipv6_forms_of_a_public_ipv4_address_stay_public() -> None:
    for address in _v4_in_v6_forms("8.8.8.8"):
        assert (address, classify(address)) == (address, "global")


@pytest.mark.parametrize("v4", ["127.0.0.1", "10.0.0.1"])
def test_an_ipv6_form_that_carries_an_internal_address_earns_nothing(v4: str) -> None:
    forms = [a for a in _v4_in_v6_forms(v4) if not a.startswith("::ffff:")]
    for address in forms:
        assert (address, is_loopback_host(f"[{address}]")) == (address, False)
        policy = FetchPolicy.for_server(f"http://[{address}]:8000/mcp", [address])
        assert (address, policy.allow_loopback, policy.allow_private) == (address, False, False)
        with pytest.raises(BlockedUrl, match="must use https"):
            policy.check_url(f"http://[{address}]:9000/token", "token endpoint")
        with pytest.raises(BlockedUrl):
            FetchPolicy.for_server("http://localhost:8000/mcp", ["127.0.0.1"]).check_addresses(
                "http://localhost:9000/token", [address], "token endpoint"
            )


def test_this_machines_own_loopback_addresses_still_earn_loopback() -> None:
    for host in ("127.0.0.1", "127.3.2.1", "[::1]", "[::ffff:127.0.0.1]", "[::ffff:127.8.9.1]"):
        assert (host, is_loopback_host(host)) == (host, True)
        address = host.strip("[]")
        policy = FetchPolicy.for_server(f"http://{host}:8000/mcp", [address])
        assert (host, policy.allow_loopback) == (host, True)
        policy.check_url(f"http://{host}:9000/token", "token endpoint")
