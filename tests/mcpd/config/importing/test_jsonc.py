"""Hosts' JSON files as people write them: comments and trailing commas are read, what
only looks like a comment inside a string is kept, and a key given twice is reported
with its path rather than silently lost."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcpd.config.importing.jsonc import objects, read_json
from mcpd.config.importing.jsonc_text import is_jsonc


def plain(text: str) -> tuple[Any, list[str]]:
    notes: list[str] = []
    return objects(read_json(text), "", notes), notes


def test_plain_json_is_read_as_json() -> None:
    text = '{"mcpServers": {"a": {"command": "x", "args": ["-v", 1, true, null]}}}'
    assert plain(text) == (json.loads(text), [])


def test_line_and_block_comments_are_dropped() -> None:
    text = """
    // the servers
    {
      "a": 1, // one
      /* two,
         over lines */ "b": 2
    }
    """
    assert plain(text) == ({"a": 1, "b": 2}, [])


def test_a_block_comment_separates_what_it_stood_between() -> None:
    assert plain("[1/**/]")[0] == [1]
    with pytest.raises(json.JSONDecodeError):
        read_json("[1/**/2]")  # "1 2", not "12"


@pytest.mark.parametrize(
    "text",
    [
        '{"a": [1, 2,], "b": 3,}',
        '{"a": [1, 2 ,\n  ], "b": 3 , }',
        '{"a": [1, 2, // last\n], "b": 3, /* end */ }',
    ],
)
def test_trailing_commas_are_dropped(text: str) -> None:
    assert plain(text) == ({"a": [1, 2], "b": 3}, [])


def test_what_looks_like_a_comment_inside_a_string_is_kept() -> None:
    text = r'{"url": "http://h/a//b", "c": "/* not */", "q": "say \"// hi\"", "t": "a,]"}'
    assert plain(text)[0] == {
        "url": "http://h/a//b",
        "c": "/* not */",
        "q": 'say "// hi"',
        "t": "a,]",
    }


def test_a_string_ending_in_an_escaped_backslash_ends_there() -> None:
    assert plain(r'{"p": "C:\\", "q": 1, // c' + "\n}")[0] == {"p": "C:\\", "q": 1}


def test_an_unclosed_block_comment_ends_the_text() -> None:
    assert plain("[1] /* never closed")[0] == [1]


@pytest.mark.parametrize("text", ['{"a": 1', '{"a": "open', "", "// only a comment"])
def test_what_is_not_json_even_so_is_an_error(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        read_json(text)


def test_a_repeated_key_is_reported_with_its_path_and_the_last_one_wins() -> None:
    text = '{"servers": {"a": {"env": {"K": "1", "K": "2"}}, "a": {"command": "x"}}}'
    value, notes = plain(text)
    assert value == {"servers": {"a": {"command": "x"}}}
    assert notes == [
        "servers.a.env.K: the key appears more than once; the last one wins",
        "servers.a: the key appears more than once; the last one wins",
    ]


def test_a_repeated_key_inside_a_list_is_reported_with_its_index() -> None:
    notes: list[str] = []
    value = objects(read_json('{"list": [{}, {"x": 1, "x": 2}]}'), "file", notes)
    assert value == {"list": [{}, {"x": 2}]}
    assert notes == ["file.list[1].x: the key appears more than once; the last one wins"]


def test_a_repeated_key_at_the_top_is_named_alone() -> None:
    assert plain('{"a": 1, "a": 2}') == (
        {"a": 2},
        ["a: the key appears more than once; the last one wins"],
    )


def test_nesting_up_to_the_bound_is_read_and_deeper_is_a_value_error() -> None:
    assert read_json("[" * 100 + "]" * 100) is not None
    with pytest.raises(ValueError, match="nested more than 100 levels deep"):
        read_json("[" * 101 + "]" * 101)
    with pytest.raises(ValueError, match="nested more than 100 levels deep"):
        read_json('{"a": ' * 200_000 + "1" + "}" * 200_000)


def test_brackets_in_strings_and_comments_are_no_nesting() -> None:
    text = '["' + "[{" * 500 + '"] // ' + "[" * 500 + "\n"
    assert read_json(text) == ["[{" * 500]


@pytest.mark.parametrize(
    ("text", "jsonc"),
    [
        ('{"a": 1 // one\n}', True),
        ('{"a": [1, 2,],}', True),
        ('{"a": "// not a comment"}', True),
        ('{"a": NaN // no host reads it\n}', False),
        ('{"a": ', False),
    ],
)
def test_jsonc_is_told_apart_from_what_no_host_reads(text: str, jsonc: bool) -> None:
    assert is_jsonc(text) is jsonc
