"""The ``mcpd://`` form of a server's URI: what comes back of it is the server's URI
character for character, and what an agent sends that is not one of its forms routes
nowhere by it."""

from __future__ import annotations

import pytest

from mcpd.registry.uris.scheme import SCHEME, unwrap_mcpd_uri, wrap

URIS = [
    "file:///home/me/notes.md",
    "",
    "/",
    "x://a b/c?d=e#f",
    "mcpd://other/file:///nested",
    "note://line\nbreak\x00nul\x1b[31m",
    "db://ü/数据/🙂",
    "relative/path",
    "%2F%00..%2F..",
]


@pytest.mark.parametrize("uri", URIS)
def test_every_uri_comes_back_character_for_character(uri: str) -> None:
    wrapped = wrap("notes", uri)
    assert wrapped.startswith(SCHEME + "notes/")
    assert unwrap_mcpd_uri(wrapped) == ("notes", uri)


def test_the_alias_ends_at_the_first_slash() -> None:
    assert unwrap_mcpd_uri("mcpd://notes/a/b/c") == ("notes", "a/b/c")
    assert unwrap_mcpd_uri("mcpd://notes/") == ("notes", "")
    assert unwrap_mcpd_uri("mcpd://A_b-9/x") == ("A_b-9", "x")


@pytest.mark.parametrize(
    "uri",
    [
        "file:///notes/x",
        "mcpd:/notes/x",
        "mcpd:notes/x",
        "mcpd://notes",  # no slash after the alias
        "mcpd:///x",  # no alias
        "mcpd://no tes/x",
        "mcpd://notes\n/x",
        "mcpd://notes\r/x",
        "mcpd://../x",
        "mcpd://note.s/x",
        "mcpd://notes:80/x",
        "mcpd://user@notes/x",
        "mcpd://ñotes/x",
        " mcpd://notes/x",
    ],
)
def test_what_is_not_an_mcpd_form_of_an_alias_unwraps_to_nothing(uri: str) -> None:
    assert unwrap_mcpd_uri(uri) is None
