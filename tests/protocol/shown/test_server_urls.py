"""How a server's URL is shown: where it is, never the credentials it may carry."""

from __future__ import annotations

import pytest

from protocol.shown.server_urls import HIDDEN, ascii_hosts, ascii_url, display_url
from protocol.shown.stand_ins import masking


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
        ("http://user:pass@127.0.0.1:8080/mcp?key=secret", "http://127.0.0.1:8080/mcp"),
        ("https://token@host/a/b?x=1&y=2#frag", "https://host/a/b"),
        ("https://host?key=secret", "https://host"),
        ("https://host#key=secret", "https://host"),
        ("https://a:b@c@host:443/", "https://host:443/"),
        ("http://[::1]:9/sse?t=1", "http://[::1]:9/sse"),
        ("user:pass@host/x?key=secret", "host/x"),
        ("", ""),
        # After the last "@", nothing is user info, however the rest is written.
        ("http://user%40x:pw@host/", "http://host/"),
        ("http://[::1]@evil/", "http://evil/"),
        ("http://user:pw@[::1]:80/", "http://[::1]:80/"),
        ("http://u:p@h@host/", "http://host/"),
        ("http://host\\@evil/", "http://evil/"),
        ("http://u:p\t@host/", "http://host/"),
        ("http://user:s3cr3tpassword@host;x/", "http://host;x/"),
        ("http://a:b@c:d@host/", "http://host/"),
        ("http://%75ser:pw@host/", "http://host/"),
        ("http://user:pw%2540@host/", "http://host/"),
        ("https://host:443@evil.com/", "https://evil.com/"),
        ("http://user@host/", "http://host/"),
        ("http://:pw@host/", "http://host/"),
        ("http://u:p%0a@host/", "http://host/"),
        ("http://host:pw@/", "http:///"),
        ("http://[::1%25u:p@x]/", "http://x]/"),
        # A server's name before the path: an "@" in the path is a registry's naming.
        (
            "https://server.smithery.ai/@owner/name/mcp?api_key=k",
            "https://server.smithery.ai/@owner/name/mcp",
        ),
        ("http://localhost/@owner/mcp", "http://localhost/@owner/mcp"),
        ("http://[::1]/@owner/mcp", "http://[::1]/@owner/mcp"),
        ("https://host.example?next=a@evil/x", "https://host.example"),
    ],
)
def test_user_info_query_and_fragment_are_left_out(url: str, shown: str) -> None:
    assert display_url(url) == shown


@pytest.mark.parametrize(
    "url",
    [
        # A password with "/", "?" or "#" in it: the parser's host is its user name and
        # the start of the password, and the rest of it is in the path, query or fragment.
        "http://user:hunter2/Zq9-SECRET@127.0.0.1:9/mcp",
        "http://user:123/Zq9-SECRET@127.0.0.1:9/mcp",
        "http://user:hunter2?Zq9-SECRET@127.0.0.1:9/mcp",
        "http://user:hunter2#Zq9-SECRET@127.0.0.1:9/mcp",
        "http://host/#u:p@x",
        "http://host?u:p@evil/",
        "https://host?next=a@evil/x",
        "https://host/p?next=a@evil/x",
        # A user name with a dot, and a password that starts with digits.
        "http://first.last:1234/Zq9-SECRET@127.0.0.1:9/mcp",
        "http://first.last:/Zq9-SECRET@127.0.0.1:9/mcp",
        "http://[user]:123/Zq9-SECRET@127.0.0.1:9/mcp",
        # A token for a user name, with a "/" in it.
        "https://hunter2/Zq9-SECRET@127.0.0.1:9/mcp",
        # No "@" at all, and a port that is no number: a password written without it.
        "http://user:pw%40host/",
        "http://user:pass@host:notaport/x?key=secret",
        # An "@" inside brackets the parser reads as an address.
        "http://[user:pw@::1]/",
        # Without a scheme the parser would take for one.
        "user:a://b@host/x",
    ],
)
def test_a_url_whose_host_or_path_could_be_user_info_shows_only_its_scheme(url: str) -> None:
    scheme = url.partition("://")[0] if url.startswith("http") else ""
    shown = display_url(url)
    assert shown == (f"{scheme}://{HIDDEN}" if scheme else HIDDEN)
    for part in ("user", "hunter2", "Zq9", "SECRET", "pw", "pass", "u:p", "next"):
        assert part not in shown


HOMOGRAPH = "https://\u0430ccounts.google.com/o/oauth2/v2/auth?client_id=x&state=s"
AS_ASCII = "https://xn--ccounts-1fg.google.com/o/oauth2/v2/auth?client_id=x&state=s"


@pytest.mark.parametrize(
    ("url", "ascii"),
    [
        (HOMOGRAPH, AS_ASCII),
        ("https://accounts.google.com/x?y=\u00e9", "https://accounts.google.com/x?y=\u00e9"),
        ("https://B\u00fccher.example:8443/a", "https://xn--bcher-kva.example:8443/a"),
        # written in full-width letters, which a browser reads as the ASCII ones
        ("https://\uff47\uff4f\uff4f\uff47\uff4c\uff45.com/", "https://google.com/"),
        ("http://[::1]:8080/x", "http://[::1]:8080/x"),
        ("https://who@\u0430pple.com/", "https://who@xn--pple-43d.com/"),
    ],
)
def test_a_host_written_with_non_ascii_letters_is_given_in_ascii(url: str, ascii: str) -> None:
    assert ascii_url(url) == ascii


def test_each_such_host_in_a_text_is_given_in_ascii_and_said_to_be() -> None:
    said = "the server moved to the authorization server https://\u0430ccounts.google.com, "
    assert ascii_hosts(said + "where mcpd has no login yet") == (
        "the server moved to the authorization server https://xn--ccounts-1fg.google.com, "
        "where mcpd has no login yet (the host xn--ccounts-1fg.google.com is written with "
        "non-ASCII letters; shown here in ASCII)"
    )
    assert ascii_hosts(f"{HOMOGRAPH} and {HOMOGRAPH}, then https://\u0440aypal.com/") == (
        f"{AS_ASCII} and {AS_ASCII}, then https://xn--aypal-uye.com/ (the hosts "
        "xn--ccounts-1fg.google.com and xn--aypal-uye.com are written with non-ASCII "
        "letters; shown here in ASCII)"
    )
    plain = "caf\u00e9 https://accounts.google.com/x HTTPS://Example.com"
    assert ascii_hosts(plain) == plain


def test_a_masked_value_is_masked_before_the_query_is_left_out() -> None:
    with masking({"Zq9cdefgh?ijklmn": "${API_TOKEN}"}):
        assert display_url("https://:8443/Zq9cdefgh?ijklmn") == "https://:8443/${API_TOKEN}"
    assert display_url("https://:8443/Zq9cdefgh?ijklmn") == "https://:8443/Zq9cdefgh"
