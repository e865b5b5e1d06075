"""What a server's tool must look like before agents are shown it: hosts refuse a whole
tools/list over one tool whose inputSchema is not an object schema, so such a tool is
left out with the reason, an optional field of the wrong JSON kind is taken off the
tool (and said), and a schema that only lacks its type gets it."""

from __future__ import annotations

import sys
from typing import Any

import msgspec
import pytest
from msgspec import UNSET, Raw

from mcpd.config.loading.load import parse_config
from mcpd.registry.gating.limits import ListTrim
from mcpd.servers.lists.toolshape import accepted, checked_tool, header_paths
from protocol.mcp import core as mcp


def trim() -> ListTrim:
    limits = parse_config({"servers": {"s": {"command": "x"}}}, env={}).list_limits("s")
    return ListTrim("s", "tools", "tools/list", limits)


def raw(text: str) -> Raw:
    # A tool as a page holds it: its fields decoded from one JSON text.
    return Raw(text.encode())


def tool(**fields: Any) -> Raw:
    return Raw(msgspec.json.encode({"name": "t", **fields}))


def schema_of(t: mcp.Tool) -> Any:
    return msgspec.json.decode(t.inputSchema)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object"},
        {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        {"properties": {}, "type": "object"},
    ],
)
def test_an_object_schema_is_kept_as_the_server_wrote_it(schema: dict[str, Any]) -> None:
    t = trim()
    got = accepted(tool(inputSchema=schema), t)
    assert got is not None
    assert schema_of(got) == schema
    assert t.trimmed.dropped == [] and t.trimmed.cut == []


def test_a_schema_written_with_spaces_is_kept() -> None:
    got = accepted(raw('{"name": "t", "inputSchema": { "type" : "object" } }'), trim())
    assert got is not None and schema_of(got) == {"type": "object"}


@pytest.mark.parametrize(
    ("schema", "given"),
    [
        ({}, {"type": "object"}),
        (
            {"properties": {"a": {"type": "integer"}}},
            {"type": "object", "properties": {"a": {"type": "integer"}}},
        ),
    ],
)
def test_a_schema_without_a_type_is_given_the_object_type(
    schema: dict[str, Any], given: dict[str, Any]
) -> None:
    t = trim()
    got = accepted(tool(inputSchema=schema), t)
    assert got is not None and schema_of(got) == given
    assert t.trimmed.cut == []  # nothing an agent relies on changed


def test_an_empty_schema_with_spaces_is_given_the_object_type() -> None:
    got = accepted(raw('{"name": "t", "inputSchema": {  \n }}'), trim())
    assert got is not None and schema_of(got) == {"type": "object"}


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ([1, 2], 't: inputSchema is not a JSON object ("[1,2]")'),
        ("object", 't: inputSchema is not a JSON object ("\\"object\\"")'),
        (None, 't: inputSchema is not a JSON object ("null")'),
        ({"type": "array"}, 't: inputSchema has type "array", not "object"'),
        (
            {"type": ["object", "null"]},
            't: inputSchema has type "[\\"object\\",\\"null\\"]", not "object"',
        ),
        ({"type": 1}, 't: inputSchema has type "1", not "object"'),
    ],
)
def test_a_schema_that_is_not_an_object_schema_leaves_the_tool_out(
    schema: Any, reason: str
) -> None:
    t = trim()
    assert accepted(tool(inputSchema=schema), t) is None
    assert t.trimmed.dropped == [reason]


def test_a_long_schema_that_is_not_an_object_is_quoted_short() -> None:
    t = trim()
    assert accepted(tool(inputSchema=["x" * 100]), t) is None
    (reason,) = t.trimmed.dropped
    said = '"[\\"' + "x" * 38 + '" (and 64 more characters)'
    assert reason == f"t: inputSchema is not a JSON object ({said})"


# A host reads a repeated key as its last value: this schema is an array schema to it.
def test_a_repeated_type_is_read_as_hosts_read_it() -> None:
    t = trim()
    assert accepted(raw('{"name":"t","inputSchema":{"type":"object","type":"array"}}'), t) is None
    assert t.trimmed.dropped == ['t: inputSchema has type "array", not "object"']


def test_a_tool_that_does_not_decode_is_left_out_as_malformed() -> None:
    t = trim()
    assert accepted(Raw(b'{"title": "no name"}'), t) is None
    assert accepted(Raw(b'{"name": 5}'), t) is None
    assert len(t.trimmed.dropped) == 2
    assert all(d.startswith("(malformed): ") for d in t.trimmed.dropped)


@pytest.mark.parametrize(
    ("field", "value"),
    [("outputSchema", [1]), ("icons", {"src": "x"}), ("execution", "sync"), ("outputSchema", None)],
)
def test_an_optional_field_of_the_wrong_kind_is_taken_off_and_said(field: str, value: Any) -> None:
    t = trim()
    got = accepted(tool(**{field: value}), t)
    assert got is not None
    assert getattr(got, field) is UNSET
    assert t.trimmed.cut == [f"tool t: listed without its {field}: not the JSON type MCP gives it"]


def test_every_field_taken_off_is_named_at_once() -> None:
    t = mcp.Tool(
        name="t",
        outputSchema=Raw(b"[]"),
        icons=Raw(b"{}"),
        execution=Raw(b"1"),
    )
    shaped, reason, removed = checked_tool(t)
    assert shaped is t and reason is None
    assert [field for field, _ in removed] == ["outputSchema", "icons", "execution"]


def test_optional_fields_of_the_right_kind_are_kept() -> None:
    t = trim()
    fields = {
        "outputSchema": {"type": "object"},
        "icons": [{"src": "https://icons.example.test/a.png"}],
        "execution": {"taskSupport": "optional"},
    }
    got = accepted(tool(**fields), t)
    assert got is not None and t.trimmed.cut == []
    for field, value in fields.items():
        assert msgspec.json.decode(getattr(got, field)) == value


def test_a_kept_tool_holds_its_own_bytes_not_its_pages() -> None:
    # A page of many tools is one bytes object: a kept tool's raw fields referring into
    # it would keep all of it alive for as long as the tool is listed.
    page = b'{"name":"t","inputSchema":{"type":"object"},"outputSchema":{},"icons":[]}'
    page += b" " * 4096
    before = sys.getrefcount(page)
    item = Raw(page)
    got = accepted(item, trim())
    del item
    assert got is not None
    assert sys.getrefcount(page) == before


# -- Mcp-Param-* headers (HTTP) --


def header_schema(annotation: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": annotation}},
    }


def test_a_tools_header_params_are_read_by_header_name() -> None:
    got = accepted(tool(inputSchema=header_schema("Region")), trim())
    assert got is not None
    assert header_paths(got, trim()) == {"Mcp-Param-Region": ("region",)}
    plain = accepted(tool(inputSchema={"type": "object"}), trim())
    assert plain is not None and header_paths(plain, trim()) == {}


def test_a_bad_header_annotation_leaves_the_tool_out() -> None:
    t = trim()
    got = accepted(tool(inputSchema=header_schema("Bad Name")), t)
    assert got is not None and t.trimmed.dropped == []
    assert header_paths(got, t) is None
    (reason,) = t.trimmed.dropped
    assert reason.startswith("t: x-mcp-header 'Bad Name'")


def test_a_tool_without_a_name_is_left_out_with_the_reason() -> None:
    t = trim()
    assert accepted(raw('{"name": "", "inputSchema": {"type": "object"}}'), t) is None
    assert t.trimmed.dropped == ["(unnamed): its name is empty"]


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("outputSchema", {"type": "object", "required": "a"}, '"required" is not an array'),
        ("outputSchema", {"type": "object", "required": [1]}, '"required" is not an array'),
        ("outputSchema", {"type": "object", "properties": []}, '"properties" is not an object'),
        ("outputSchema", {"type": "object", "properties": {"a": 5}}, 'property "a" is not'),
        ("execution", {"taskSupport": "sometimes"}, '"taskSupport" is not one of'),
        ("execution", {"taskSupport": None}, '"taskSupport" is not one of'),
        ("icons", [{"src": 5}], 'icon 0\'s "src" is not a string'),
        ("icons", [{"src": "a"}, 7], "an icon is not an object"),
        ("icons", [{"src": "a", "sizes": "48x48"}], 'icon 0\'s "sizes" is not an array of strings'),
        ("icons", [{"src": "a", "theme": "blue"}], 'icon 0\'s "theme" is not light or dark'),
    ],
)
def test_a_field_holding_what_no_host_takes_is_taken_off_and_said(
    field: str, value: Any, why: str
) -> None:
    t = trim()
    got = accepted(tool(inputSchema={"type": "object"}, **{field: value}), t)
    assert got is not None and getattr(got, field) is UNSET
    [said] = t.trimmed.cut
    assert said.startswith(f"tool t: listed without its {field}: {why}")


@pytest.mark.parametrize(
    "value",
    [
        {"type": "object", "required": ["a"], "properties": {"a": {}, "b": True, "c": False}},
        {"type": "object", "properties": {}},
    ],
)
def test_a_schema_a_host_takes_is_kept(value: Any) -> None:
    t = trim()
    got = accepted(
        tool(
            inputSchema=value,
            outputSchema=value,
            execution={"taskSupport": "forbidden"},
            icons=[{"src": "a", "sizes": ["48x48"], "theme": "dark", "mimeType": "x"}],
        ),
        t,
    )
    assert got is not None and t.trimmed.cut == [] and t.trimmed.dropped == []
    assert got.outputSchema is not UNSET and got.icons is not UNSET


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"type": "object", "required": "q"}, '"required" is not an array of strings'),
        ({"type": "object", "properties": {"q": "string"}}, 'property "q" is not a schema'),
    ],
)
def test_an_input_schema_holding_what_no_host_takes_leaves_the_tool_out(
    schema: Any, why: str
) -> None:
    t = trim()
    assert accepted(tool(inputSchema=schema), t) is None
    [dropped] = t.trimmed.dropped
    assert dropped.startswith("t:") and f"inputSchema: {why}" in dropped
