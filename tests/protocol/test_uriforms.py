"""The spellings of a URI a server may read as the same resource."""

from __future__ import annotations

import pytest

from protocol.uriforms import forms, read_as


@pytest.mark.parametrize(
    "spelled",
    [
        "res://s1/c#",
        "res://s1/c?",
        "RES://s1/c",
        "res://s1/./c",
        "res://s1//c",
        "res://s1/%63",
        "res://s1/t/../c",
        "res://s1/t/u/../../c",
        " res://s1/c\n",
        "res://s1/\tc",
        "res://s1\\c",
    ],
)
def test_every_spelling_is_read_as_the_uri_it_spells(spelled: str) -> None:
    assert read_as(spelled) == "res://s1/c"


def test_a_path_climbs_no_higher_than_its_root() -> None:
    assert read_as("file:///srv/a/../../../etc/passwd") == "file:///etc/passwd"
    assert read_as("file:///srv/a%2F..%2F..%2Fetc/passwd") == "file:///etc/passwd"
    assert read_as("file:///home/u/./.ssh/") == "file:///home/u/.ssh/"


def test_a_query_is_kept_as_read_and_dropped_in_the_bare_form() -> None:
    assert forms("res://s1/c?v=1#top") == ("res://s1/c?v=1#top", "res://s1/c?v=1", "res://s1/c")


def test_a_uri_written_plainly_is_its_own_reading() -> None:
    for uri in ("file:///srv/notes.txt", "notes://{id}", "res:c", "github://Owner/repo"):
        assert forms(uri) == (uri, uri, uri)


def test_an_authority_keeps_its_case() -> None:
    # A server's own scheme may tell cases apart where a host name would not.
    assert read_as("Notes://Inbox/1") == "notes://Inbox/1"
