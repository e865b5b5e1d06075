"""Editing one ``[PARENT.NAME]`` table of a host's TOML file as text: the rest of the
file (comments, layout, other tables) is kept byte for byte, what only looks like a
header (inside a multi-line string or array) is left alone, and an edit that cannot be
made safely is refused with a reason that says what to do."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from mcpd.cli.hosts.hostconfig_toml import merge_toml, render_table

NOTES = {"command": "mcpd", "args": ["connect", "notes"]}


def merged(existing: str, name: str = "notes", body: dict[str, Any] | None = None) -> str:
    return merge_toml(existing, "mcp_servers", name, NOTES if body is None else body)


def test_a_table_is_appended_to_an_empty_file() -> None:
    assert merged("") == '[mcp_servers.notes]\ncommand = "mcpd"\nargs = ["connect", "notes"]\n'


def test_a_table_is_appended_after_a_blank_line_and_the_file_is_kept() -> None:
    existing = '# my settings\nmodel = "o3"  # the default\n\n[mcp_servers.git]\ncommand = "g"'
    text = merged(existing)
    assert text.startswith(existing + "\n\n[mcp_servers.notes]\n")
    assert tomllib.loads(text)["mcp_servers"] == {"git": {"command": "g"}, "notes": NOTES}


def test_a_file_ending_in_a_blank_line_gets_no_second_one() -> None:
    text = merged('model = "o3"\n\n')
    assert text == 'model = "o3"\n\n' + render_table("mcp_servers", "notes", NOTES)


EXISTING = """\
model = "o3"

# the notes server, set up by hand
[mcp_servers.notes]
command = "old"  # to be replaced

[mcp_servers.notes.env]
TOKEN = "x"

# git, kept as it is
[mcp_servers.git]
command = "git-mcp"
"""


def test_a_table_is_replaced_where_it_was_with_its_sub_tables() -> None:
    text = merged(EXISTING)
    assert text == (
        'model = "o3"\n'
        "\n"
        "# the notes server, set up by hand\n"
        '[mcp_servers.notes]\ncommand = "mcpd"\nargs = ["connect", "notes"]\n'
        "\n"
        "# git, kept as it is\n"
        '[mcp_servers.git]\ncommand = "git-mcp"\n'
    )


def test_a_table_split_in_two_places_is_replaced_at_the_first() -> None:
    existing = (
        '[mcp_servers.notes]\ncommand = "old"\n[other]\nx = 1\n[mcp_servers.notes.env]\nA = "1"\n'
    )
    text = merged(existing)
    assert text.startswith('[mcp_servers.notes]\ncommand = "mcpd"\n')
    assert "old" not in text and "A =" not in text
    assert tomllib.loads(text) == {"mcp_servers": {"notes": NOTES}, "other": {"x": 1}}


def test_a_quoted_name_is_found_and_written_quoted() -> None:
    existing = '[mcp_servers."my notes"]\ncommand = "old"\n'
    text = merged(existing, "my notes")
    assert text.count("my notes") == 1
    assert text.startswith('[mcp_servers."my notes"]\n')
    assert tomllib.loads(text) == {"mcp_servers": {"my notes": NOTES}}
    literal = "[ mcp_servers . 'my notes' ]  # spaced\ncommand = \"old\"\n"
    assert tomllib.loads(merged(literal, "my notes")) == {"mcp_servers": {"my notes": NOTES}}


@pytest.mark.parametrize(
    "disguise",
    [
        'doc = """\n[mcp_servers.notes]\ncommand = "fake"\n"""\n',
        "doc = '''\n[mcp_servers.notes]\n'''\n",
        'doc = """ escaped \\""" still inside\n[mcp_servers.notes]\n"""\n',
        'list = [\n["a"],\n]\n',
    ],
)
def test_what_only_looks_like_a_header_is_left_alone(disguise: str) -> None:
    existing = "[top]\n" + disguise
    text = merged(existing)
    assert text.startswith(existing)
    assert tomllib.loads(text)["mcp_servers"] == {"notes": NOTES}


def test_a_header_inside_a_multi_line_array_is_not_one() -> None:
    existing = '[top]\nlist = [\n  "[mcp_servers.notes]",\n  [1],\n]\n[mcp_servers.notes]\nx = 1\n'
    text = merged(existing)
    assert '"[mcp_servers.notes]"' in text
    assert tomllib.loads(text) == {
        "top": {"list": ["[mcp_servers.notes]", [1]]},
        "mcp_servers": {"notes": NOTES},
    }


def test_an_array_of_arrays_in_the_replaced_table_is_cut_whole() -> None:
    # Its inner lines read like headers ([1], ["a"]) but lie inside brackets.
    existing = (
        '[mcp_servers.notes]\nmatrix = [\n  [1]\n,  ["a"]\n]\n[mcp_servers.git]\ncommand = "g"\n'
    )
    text = merged(existing)
    assert "matrix" not in text and '["a"]' not in text
    assert tomllib.loads(text) == {"mcp_servers": {"notes": NOTES, "git": {"command": "g"}}}


def test_an_entry_written_inline_is_not_edited() -> None:
    with pytest.raises(ValueError, match=r"mcp_servers\.notes is written inline or with dotted"):
        merged('mcp_servers = { notes = { command = "x" } }\n')
    with pytest.raises(ValueError, match="by hand"):
        merged('[mcp_servers]\nnotes.command = "x"\n')


def test_a_parent_that_is_an_inline_table_is_refused_not_broken() -> None:
    with pytest.raises(ValueError, match=r"adding \[mcp_servers\.notes\] would not parse"):
        merged('mcp_servers = { git = { command = "g" } }\n')


@pytest.mark.parametrize("existing", ["mcp_servers = 3\n", "[[mcp_servers]]\nname = 'x'\n"])
def test_a_parent_that_is_not_a_table_is_named(existing: str) -> None:
    with pytest.raises(ValueError, match="'mcp_servers' is not a table"):
        merged(existing)


def test_a_file_that_is_not_toml_is_named() -> None:
    with pytest.raises(ValueError, match=r"not valid TOML: .*; fix it or add the entry by hand"):
        merged("[mcp_servers\n")


def test_other_entries_are_never_changed() -> None:
    existing = '[mcp_servers.git]\ncommand = "g"\n[mcp_servers.notes]\ncommand = "old"\n'
    text = merged(existing)
    assert tomllib.loads(text) == {"mcp_servers": {"git": {"command": "g"}, "notes": NOTES}}
    assert text.startswith('[mcp_servers.git]\ncommand = "g"\n')


# -- render_table --


def test_render_table_writes_each_kind_of_value() -> None:
    body = {
        "command": 'say "hi"\\now',
        "enabled": False,
        "timeout": 2.5,
        "retries": 3,
        "args": ["a", 1, True],
        "env": {"A": "1", "with space": "x"},
        "odd key": "\x7f",
    }
    text = render_table("mcp_servers", "a.b", body)
    assert text.splitlines()[0] == '[mcp_servers."a.b"]'
    assert "enabled = false" in text
    assert 'env = { A = "1", "with space" = "x" }' in text
    assert '"odd key" = "\\u007f"' in text
    assert tomllib.loads(text) == {"mcp_servers": {"a.b": body}}


def test_render_table_refuses_what_toml_cannot_hold() -> None:
    with pytest.raises(TypeError, match="cannot write NoneType as TOML"):
        render_table("mcp_servers", "n", {"x": None})
