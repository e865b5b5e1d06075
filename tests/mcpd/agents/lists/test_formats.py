"""mcpd's tools in the shapes model APIs take: a name, a description and an object
schema, whatever else a tool carries left out; and which names are too long for a
host that adds its own prefix."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.agents.lists.formats import FORMATS, too_long, translate

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def listed(**fields: Any) -> dict[str, Any]:
    """A tool as tools/list gives it, with everything mcpd adds."""
    tool = {
        "name": "mcp__notes__search",
        "title": "[notes] Search",
        "description": "[notes] Find notes.",
        "inputSchema": SCHEMA,
        "outputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": False},
        "icons": [{"src": "x"}],
        "_meta": {"mcpd/server": "notes", "mcpd/originalName": "search"},
    }
    tool.update(fields)
    return tool


def test_each_api_gets_the_name_description_and_schema_alone() -> None:
    tool = listed()
    assert translate([tool], "anthropic") == [
        {"name": "mcp__notes__search", "description": "[notes] Find notes.", "input_schema": SCHEMA}
    ]
    assert translate([tool], "openai") == [
        {
            "type": "function",
            "function": {
                "name": "mcp__notes__search",
                "description": "[notes] Find notes.",
                "parameters": SCHEMA,
            },
        }
    ]
    assert translate([tool], "openai-responses") == [
        {
            "type": "function",
            "name": "mcp__notes__search",
            "description": "[notes] Find notes.",
            "parameters": SCHEMA,
        }
    ]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize(
    "schema", [None, "object", ["type", "object"], 7, True, "missing"], ids=repr
)
def test_a_schema_that_is_no_object_becomes_an_empty_object_schema(fmt: str, schema: Any) -> None:
    tool = listed(inputSchema=schema)
    if schema == "missing":
        del tool["inputSchema"]
    [shaped] = translate([tool], fmt)
    inner = shaped.get("function", shaped)
    assert inner.get("input_schema", inner.get("parameters")) == {"type": "object"}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("description", [None, "", "missing"])
def test_a_tool_without_a_description_gets_an_empty_one(fmt: str, description: Any) -> None:
    tool = listed(description=description)
    if description == "missing":
        del tool["description"]
    [shaped] = translate([tool], fmt)
    assert shaped.get("function", shaped)["description"] == ""


def test_the_order_of_the_listing_is_kept() -> None:
    tools = [listed(name=f"t{i}") for i in (3, 1, 2)]
    assert [t["name"] for t in translate(tools, "anthropic")] == ["t3", "t1", "t2"]
    assert translate([], "openai") == []


def test_names_too_long_count_the_hosts_prefix() -> None:
    names = ["a" * 10, "b" * 11, "c" * 64]
    assert too_long(names, 64) == []
    assert too_long(names, 10) == ["b" * 11, "c" * 64]
    assert too_long(names, 64, prefix="mcp__mcpd__") == ["c" * 64]
    assert too_long(names, 21, prefix="x" * 11) == ["b" * 11, "c" * 64]  # 10 + 11 fits
