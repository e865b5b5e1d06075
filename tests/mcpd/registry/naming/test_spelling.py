"""How a local name is spelled on its own: the template filled in, the characters agents
may use, a hashed name's length and its digits, and which names read as hashed ones."""

from __future__ import annotations

import hashlib

import pytest

from mcpd.registry.naming.spelling import (
    alias_prefix,
    candidate_name,
    digits_of,
    hash_shaped,
    hashed_name,
    most_digits,
)


def test_the_template_is_filled_in_and_unsafe_characters_become_underscores() -> None:
    assert candidate_name("mcp__{alias}__{tool}", "notes", "send.mail") == "mcp__notes__send_mail"
    # The tool's name is not read as a template: braces in it are only characters.
    assert candidate_name("{alias}_{tool}", "a", "{alias}") == "a__alias_"


def test_a_hashed_name_fits_the_length_and_ends_in_the_hash_of_whose_it_is() -> None:
    digest = hashlib.sha1(b"notes::daily").hexdigest()
    name = hashed_name("mcp__notes__daily_report", "notes", "daily", 16)
    assert name == f"mcp__note_{digest[:6]}" and len(name) == 16
    longer = hashed_name("mcp__notes__daily_report", "notes", "daily", 16, digits=8)
    assert longer == f"mcp__no_{digest[:8]}" and digits_of(longer) == 8


def test_a_hash_never_takes_the_whole_name() -> None:
    assert most_digits(64) == 40  # no SHA-1 digest has more
    assert most_digits(12) == 10  # a character of the name's own, and its underscore


@pytest.mark.parametrize(
    ("name", "shaped"),
    [
        ("tool_abcdef", True),
        ("tool_0123456789", True),
        ("_abcdef", True),
        ("tool_abcde", False),  # too few digits
        ("tool_ABCDEF", False),  # hashes are written in lower case
        ("tool_abcdeg", False),
        ("abcdef", False),  # no underscore before them
    ],
)
def test_a_name_reads_as_hashed_when_it_ends_as_a_hashed_name_does(name: str, shaped: bool) -> None:
    assert hash_shaped(name) is shaped


def test_every_hashed_name_reads_as_hashed() -> None:
    for length in (8, 16, 64):
        assert hash_shaped(hashed_name("x" * 80, "a", "t", length))


def test_an_aliases_prefix_is_what_the_template_puts_before_the_tool() -> None:
    assert alias_prefix("mcp__{alias}__{tool}", "my.server") == "mcp__my_server__"
    assert alias_prefix("{tool}", "s") == ""
