"""How a server's URL is shown: where it is, never the credentials it may carry."""

from __future__ import annotations

import pytest

from protocol.urls import ascii_hosts, ascii_url, display_url


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
        # Malformed ones are cut the same way, not shown whole.
        ("http://user:pass@host:notaport/x?key=secret", "http://host:notaport/x"),
        ("user:pass@host/x?key=secret", "host/x"),
        ("", ""),
    ],
)
def test_user_info_query_and_fragment_are_left_out(url: str, shown: str) -> None:
    assert display_url(url) == shown


def test_a_query_that_looks_like_user_info_does_not_move_the_host() -> None:
    # The query ends the authority: the "@" in it names no user, and the host stays.
    assert display_url("https://host?next=a@evil/x") == "https://host"
    assert display_url("https://host/p?next=a@evil/x") == "https://host/p"


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
