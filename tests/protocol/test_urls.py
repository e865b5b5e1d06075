"""How a server's URL is shown: where it is, never the credentials it may carry."""

from __future__ import annotations

import pytest

from protocol.urls import display_url


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
