"""A host's JSON file read and written back as the user wrote it: numbers keep their
spelling, what hosts refuse is refused, a lone surrogate goes back as its escape, and
the lines end as the file's do."""

from __future__ import annotations

import json

import pytest

from mcpd.cli.hosts.hostconfig_json import (
    JsonNumber,
    NotJSON,
    Unreadable,
    dumps,
    line_ending,
    loads,
)


@pytest.mark.parametrize(
    "number", ["1e400", "1.5E3", "0.1000000000000000055511151231257827", "-0", "7"]
)
def test_a_number_goes_back_as_it_was_written(number: str) -> None:
    text = f'{{\n  "n": {number}\n}}\n'
    doc = loads(text)
    assert doc == {"n": JsonNumber(number)}
    assert dumps(doc) == text


@pytest.mark.parametrize("word", ["NaN", "Infinity", "-Infinity"])
def test_what_hosts_refuse_as_a_number_is_refused(word: str) -> None:
    with pytest.raises(NotJSON, match=f"{word} is no JSON number"):
        loads(f'{{"n": {word}}}')


def test_text_that_is_not_json_says_where() -> None:
    with pytest.raises(NotJSON, match="line 2 column 1"):
        loads('{"a": 1,\n}')


def test_a_key_written_twice_is_refused_rather_than_one_kept() -> None:
    with pytest.raises(Unreadable, match="the key 'a' appears twice"):
        loads('{"a": 1, "b": {}, "a": 2}')


def test_a_document_nested_too_deeply_is_unreadable_not_a_crash() -> None:
    with pytest.raises(Unreadable, match="nested too deeply to read"):
        loads("[" * 100_000 + "]" * 100_000)
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(Unreadable, match="nested too deeply to write back"):
        dumps(deep)


def test_a_lone_surrogate_goes_back_as_its_escape_and_other_text_as_it_is() -> None:
    text = '{\n  "s": "\\ud83d x",\n  "t": "été 😀 \\"q\\""\n}\n'
    doc = loads(text)
    assert doc == {"s": "\ud83d x", "t": 'été 😀 "q"'}
    assert dumps(doc) == text


def test_the_document_is_indented_by_two_and_empty_containers_stay_on_one_line() -> None:
    doc = {"mcpServers": {"a": {"command": "x", "args": [], "env": {}, "on": True, "n": None}}}
    written = dumps(doc)
    assert written == (
        "{\n"
        '  "mcpServers": {\n'
        '    "a": {\n'
        '      "command": "x",\n'
        '      "args": [],\n'
        '      "env": {},\n'
        '      "on": true,\n'
        '      "n": null\n'
        "    }\n"
        "  }\n"
        "}\n"
    )
    assert json.loads(written) == doc


def test_lines_end_as_the_files_first_line_does() -> None:
    assert line_ending('{\r\n  "a": 1\r\n}\r\n') == "\r\n"
    assert line_ending('{\n  "a": 1\r\n}') == "\n"
    assert line_ending("{}") == "\n"
    assert (
        dumps({"a": [1, "x\ny"]}, eol="\r\n")
        == '{\r\n  "a": [\r\n    1,\r\n    "x\\ny"\r\n  ]\r\n}\r\n'
    )


def test_a_value_json_has_no_form_for_is_refused() -> None:
    with pytest.raises(TypeError, match="cannot write float as JSON"):
        dumps({"f": 1.5})
