"""The catalog keeps tools, prompts and resources of a server in step: judged again,
marked down, renamed and removed together, so no list agents read lags the others."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from mcpd.config.tables.model import NamingConfig
from mcpd.registry.tables.catalog import Catalog
from protocol.mcp import core as mcp
from protocol.mcp import features

SCHEMA = msgspec.Raw(b'{"type":"object"}')


def tool(name: str, description: str = "") -> mcp.Tool:
    return mcp.Tool(name=name, description=description or f"does {name}", inputSchema=SCHEMA)


def prompt(name: str, description: str = "") -> features.Prompt:
    return features.Prompt(name=name, description=description or f"about {name}")


def prompts_of(catalog: Catalog) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for raw in catalog.prompts.listing():
        item = json.loads(bytes(raw))
        out[item["name"]] = item
    return out


def test_approving_a_prompt_of_a_server_without_tools_is_news_for_agents() -> None:
    catalog = Catalog(NamingConfig())
    catalog.prompts.update("notes", [prompt("daily", "one")])
    catalog.gate.settle("notes")
    catalog.prompts.update("notes", [prompt("daily", "two")])
    assert prompts_of(catalog)["mcp__notes__daily"]["_meta"]["mcpd/available"] is False
    assert not catalog.rejudge("notes")  # nothing approved yet
    catalog.gate.review.approve("notes", None)
    assert catalog.rejudge("notes")
    assert prompts_of(catalog)["mcp__notes__daily"]["description"] == "[notes] two"


def test_approving_a_tool_and_a_prompt_at_once_shows_both() -> None:
    catalog = Catalog(NamingConfig())
    catalog.update("notes", [tool("search", "one")])
    catalog.prompts.update("notes", [prompt("daily", "one")])
    catalog.gate.settle("notes")
    catalog.update("notes", [tool("search", "two")])
    catalog.prompts.update("notes", [prompt("daily", "two")])
    assert {p.kind for p in catalog.gate.review.pending("notes")} == {"tool", "prompt"}
    catalog.gate.review.approve("notes", None)
    # The tools changing must not keep the prompts from being judged again.
    assert catalog.rejudge("notes")
    entry = catalog.lookup("mcp__notes__search")
    assert entry is not None and entry.held is None
    assert prompts_of(catalog)["mcp__notes__daily"]["description"] == "[notes] two"
    assert not catalog.rejudge("notes")


def test_a_server_going_down_marks_its_tools_and_prompts_and_a_held_prompt_stays_held() -> None:
    catalog = Catalog(NamingConfig())
    catalog.update("notes", [tool("search")])
    catalog.prompts.update("notes", [prompt("daily", "one"), prompt("weekly")])
    catalog.gate.settle("notes")
    catalog.prompts.update("notes", [prompt("daily", "two"), prompt("weekly")])
    assert catalog.set_availability("notes", False, "unavailable: notes is down")
    entry = catalog.lookup("mcp__notes__search")
    assert entry is not None and not entry.available
    shown = prompts_of(catalog)
    assert shown["mcp__notes__weekly"]["description"].startswith("[unavailable: notes is down]")
    assert shown["mcp__notes__daily"]["description"].startswith("[held: ")
    assert catalog.set_availability("notes", True)
    shown = prompts_of(catalog)
    assert shown["mcp__notes__weekly"]["_meta"]["mcpd/available"] is True
    assert shown["mcp__notes__daily"]["_meta"]["mcpd/available"] is False


def test_a_new_naming_renames_tools_and_prompts_alike() -> None:
    catalog = Catalog(NamingConfig())
    catalog.update("notes", [tool("daily")])
    catalog.prompts.update("notes", [prompt("daily")])
    catalog.rename(NamingConfig(template="x_{alias}_{tool}"))
    assert catalog.lookup("x_notes_daily") is not None
    assert catalog.prompts.lookup("x_notes_daily") is not None
    assert catalog.lookup("mcp__notes__daily") is None
    assert catalog.prompts.lookup("mcp__notes__daily") is None


def test_a_removed_server_leaves_nothing_listed_or_waiting() -> None:
    catalog = Catalog(NamingConfig())
    catalog.update("notes", [tool("search")])
    catalog.prompts.update("notes", [prompt("daily", "one")])
    catalog.resources.update("notes", [features.Resource(uri="x://a", name="a")], [])
    catalog.gate.settle("notes")
    catalog.prompts.update("notes", [prompt("daily", "two")])
    assert catalog.gate.review.pending("notes") != []
    assert catalog.remove("notes")
    assert catalog.listing() == [] and catalog.prompts.listing() == []
    assert catalog.resources.listing() == []
    assert catalog.gate.review.pending("notes") == []
    assert not catalog.remove("notes")


def test_a_server_without_tools_going_down_or_removed_is_news() -> None:
    catalog = Catalog(NamingConfig())
    catalog.prompts.update("notes", [prompt("daily")])
    catalog.resources.update("files", [features.Resource(uri="x://a", name="a")], [])
    for alias in ("notes", "files"):
        assert catalog.set_availability(alias, False, f"unavailable: {alias} is down")
        assert not catalog.set_availability(alias, False, f"unavailable: {alias} is down")
        assert catalog.remove(alias)
        assert not catalog.remove(alias)
    assert catalog.prompts.listing() == [] and catalog.resources.listing() == []
