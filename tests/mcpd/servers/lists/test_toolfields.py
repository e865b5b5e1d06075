"""The members of a tool's fields that hosts check: each fault a host would refuse the
whole list over is named (a property's name quoted and cut), and what every era
allows passes."""

from __future__ import annotations

import json

import pytest
from msgspec import Raw

from mcpd.servers.lists.toolfields import execution_fault, icons_fault, schema_fault, schema_members

NOT_NAMED = '"taskSupport" is not one of forbidden, optional, required'


def schema(text: str) -> str | None:
    return schema_fault(schema_members.decode(text))


def raw(value: object) -> Raw:
    return Raw(json.dumps(value).encode())


@pytest.mark.parametrize(
    "text",
    [
        "{}",
        '{"type": "object"}',
        '{"required": [], "properties": {}}',
        '{"required": ["a"], "properties": {"a": {"type": "string"}, "b": true, "c": false}}',
        '{"type": 5, "other": [1]}',
    ],
)
def test_a_schema_a_host_can_take_has_no_fault(text: str) -> None:
    assert schema(text) is None


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ('{"required": "a"}', '"required" is not an array of strings'),
        ('{"required": ["a", 1]}', '"required" is not an array of strings'),
        ('{"required": null}', '"required" is not an array of strings'),
        ('{"properties": []}', '"properties" is not an object'),
        ('{"properties": null}', '"properties" is not an object'),
        ('{"properties": {"a": {}, "b": 1}}', 'property "b" is not a schema'),
        ('{"properties": {"a\\nb": "x"}}', 'property "a\\nb" is not a schema'),
    ],
)
def test_a_schema_fault_is_named(text: str, fault: str) -> None:
    assert schema(text) == fault


def test_a_long_property_name_is_quoted_cut() -> None:
    found = schema(json.dumps({"properties": {"p" * 100: 0}}))
    assert found == f'property "{"p" * 40}" (and 60 more characters) is not a schema'


@pytest.mark.parametrize(
    "value", [{}, {"taskSupport": "forbidden"}, {"taskSupport": "optional", "x": 1}]
)
def test_an_execution_a_host_can_take_has_no_fault(value: object) -> None:
    assert execution_fault(raw(value)) is None


@pytest.mark.parametrize(
    ("value", "fault"),
    [
        ([], "not an object"),
        ({"taskSupport": "always"}, NOT_NAMED),
        ({"taskSupport": None}, NOT_NAMED),
        ({"taskSupport": ["required"]}, NOT_NAMED),
    ],
)
def test_an_execution_fault_is_named(value: object, fault: str) -> None:
    assert execution_fault(raw(value)) == fault


def test_icons_a_host_can_take_have_no_fault() -> None:
    icons = [
        {"src": "https://x/i.png"},
        {"src": "data:,", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"},
    ]
    assert icons_fault(raw(icons)) is None
    assert icons_fault(raw([])) is None


@pytest.mark.parametrize(
    ("icon", "fault"),
    [
        ({}, 'icon 1\'s "src" is not a string'),
        ({"src": 5}, 'icon 1\'s "src" is not a string'),
        ({"src": "s", "mimeType": 1}, 'icon 1\'s "mimeType" is not a string'),
        ({"src": "s", "sizes": "48x48"}, 'icon 1\'s "sizes" is not an array of strings'),
        ({"src": "s", "theme": "blue"}, 'icon 1\'s "theme" is not light or dark'),
        ({"src": "s", "theme": None}, 'icon 1\'s "theme" is not light or dark'),
    ],
)
def test_the_first_icon_fault_is_named_with_its_place(icon: object, fault: str) -> None:
    assert icons_fault(raw([{"src": "ok"}, icon, {}])) == fault


def test_an_icon_that_is_no_object_is_named() -> None:
    assert icons_fault(raw(["https://x/i.png"])) == "an icon is not an object"


def test_deeply_nested_fields_are_a_fault_not_a_crash() -> None:
    nested = b"[" * 100_000 + b"]" * 100_000
    assert execution_fault(Raw(b'{"taskSupport": ' + nested + b"}")) == "not an object"
    assert icons_fault(Raw(b'[{"src": ' + nested + b"}]")) == "an icon is not an object"
