"""A listed tool as each era's agents are shown it (``eras``): the legacy eras take
only an object output schema, 2026-07-28 has no ``execution``; the tool itself is
listed to both, and the table keeps it as its server defined it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from msgspec import Raw

from mcpd.registry.tables.eras import Projected, listing_for_era, object_rooted, without_booleans
from mcpd.registry.tables.shown import Entry
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

ARRAY = b'{"type":"array","items":{"type":"string"}}'
OBJECT = b'{"type":"object","properties":{"n":{"type":"integer"}}}'
EXECUTION = b'{"taskSupport":"optional"}'


def entry(name: str, output: bytes | None = None, execution: bytes | None = None) -> Entry:
    tool = mcp.Tool(name=name, description="d")
    if output is not None:
        tool.outputSchema = Raw(output)
    if execution is not None:
        tool.execution = Raw(execution)
    return Entry(f"mcp__s__{name}", "s", name, tool)


def listed(items: Any) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = json.loads(rpc.encode(list(items)))
    return tools


@pytest.mark.parametrize(
    ("schema", "kept"),
    [
        (OBJECT, True),
        (b'{"properties":{},"type":"object"}', True),
        (ARRAY, False),
        (b'{"type":["object","null"]}', False),
        (b'{"anyOf":[{"type":"object"}]}', False),
        (b"{}", False),
        (b'{"type":"object","type":"string"}', False),
    ],
)
def test_a_legacy_agent_is_shown_an_output_schema_only_when_it_is_an_objects(
    schema: bytes, kept: bool
) -> None:
    assert object_rooted(Raw(schema)) is kept
    [tool] = listed(listing_for_era([entry("t", schema)], modern=False))
    assert tool["name"] == "mcp__s__t"
    assert ("outputSchema" in tool) is kept
    [tool] = listed(listing_for_era([entry("t", schema)], modern=True))
    assert tool["outputSchema"] == json.loads(schema)


def test_a_modern_agent_is_shown_no_execution_and_a_legacy_one_is() -> None:
    items = [entry("t", execution=EXECUTION)]
    [modern] = listed(listing_for_era(items, modern=True))
    assert "execution" not in modern and modern["name"] == "mcp__s__t"
    [legacy] = listed(listing_for_era(items, modern=False))
    assert legacy["execution"] == {"taskSupport": "optional"}


def test_a_listing_no_tool_of_which_differs_is_the_same_sequence() -> None:
    items = [entry("a", OBJECT), entry("b")]
    assert listing_for_era(items, modern=False) is items
    assert listing_for_era(items, modern=True) is items


def test_only_the_tools_that_differ_are_projected_in_their_places() -> None:
    own = mcp.Tool(name="mcpd_search_tools", outputSchema=Raw(ARRAY))
    items: list[Entry | mcp.Tool] = [entry("a", OBJECT), entry("b", ARRAY), entry("c"), own]
    shown = listing_for_era(items, modern=False)
    assert [type(item) for item in shown] == [Entry, Projected, Entry, Projected]
    assert shown[0] is items[0] and shown[2] is items[2]
    assert [t["name"] for t in listed(shown)] == [
        "mcp__s__a",
        "mcp__s__b",
        "mcp__s__c",
        "mcpd_search_tools",
    ]
    assert [("outputSchema" in t) for t in listed(shown)] == [True, False, False, False]
    # The definitions themselves are untouched: what is pinned and reviewed.
    assert isinstance(items[1], Entry) and items[1].tool.outputSchema == Raw(ARRAY)


BOOLEAN_PROPS = b'{"type":"object","properties":{"a":true,"b":false,"c":{"type":"string"}}}'


@pytest.mark.parametrize("field", ["inputSchema", "outputSchema"])
def test_a_legacy_agent_is_shown_a_boolean_subschema_as_the_object_that_means_the_same(
    field: str,
) -> None:
    tool = mcp.Tool(name="t", inputSchema=Raw(b'{"type":"object"}'))
    if field == "inputSchema":
        tool.inputSchema = Raw(BOOLEAN_PROPS)
    else:
        tool.outputSchema = Raw(BOOLEAN_PROPS)
    items = [Entry("mcp__s__t", "s", "t", tool)]
    [legacy] = listed(listing_for_era(items, modern=False))
    assert legacy["name"] == "mcp__s__t"
    assert legacy[field]["properties"] == {"a": {}, "b": {"not": {}}, "c": {"type": "string"}}
    [modern] = listed(listing_for_era(items, modern=True))
    assert modern[field] == json.loads(BOOLEAN_PROPS)
    # The definition itself is untouched.
    assert json.loads(bytes(getattr(tool, field))) == json.loads(BOOLEAN_PROPS)


def test_only_the_roots_boolean_properties_are_rewritten_the_rest_kept_as_sent() -> None:
    # The legacy SDKs refuse a boolean only as one of the root's properties; elsewhere
    # (``additionalProperties: false`` above all, which strict tool-calling APIs want
    # spelled so) the schema reaches a legacy agent as the server wrote it.
    nested = (
        b'{"type":"object","properties":{'
        b'"o":{"type":"object","properties":{"x":false},"additionalProperties":false},'
        b'"l":{"type":"array","items":true,"prefixItems":[false]},'
        b'"d":{"default":true,"const":false},"n":{"x":1e400}},'
        b'"additionalProperties":false,"$defs":{"k":true}}'
    )
    assert without_booleans(Raw(nested)) is None
    with_root = nested.replace(b'"d":{"default":true,"const":false}', b'"d":true,"f":false')
    rewritten = without_booleans(Raw(with_root))
    assert rewritten is not None
    assert bytes(rewritten) == with_root.replace(b'"d":true,"f":false', b'"d":{},"f":{"not":{}}')
    assert without_booleans(Raw(b'{"type":"object","default":true}')) is None
    assert without_booleans(Raw(b'{"type":"object","properties":[true]}')) is None
    assert without_booleans(Raw(OBJECT)) is None


def test_a_strict_schema_reaches_a_legacy_agent_as_the_server_wrote_it() -> None:
    strict = b'{"type":"object","properties":{"q":{"type":"string"}},"additionalProperties":false}'
    tool = mcp.Tool(name="t", inputSchema=Raw(strict), outputSchema=Raw(strict))
    items = [Entry("mcp__s__t", "s", "t", tool)]
    assert listing_for_era(items, modern=False) is items
    [legacy] = listed(listing_for_era(items, modern=False))
    assert legacy["inputSchema"]["additionalProperties"] is False
    assert legacy["outputSchema"]["additionalProperties"] is False


def test_a_tool_run_only_as_a_task_is_shown_to_a_legacy_agent_without_execution() -> None:
    items = [entry("t", execution=b'{"taskSupport":"required"}')]
    [legacy] = listed(listing_for_era(items, modern=False))
    assert "execution" not in legacy and legacy["name"] == "mcp__s__t"
