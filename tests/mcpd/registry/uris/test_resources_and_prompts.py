"""The prompt and resource tables (no I/O): local names, curation, markers, and the
URI scheme that sends every read back to the server that owns the URI."""

from __future__ import annotations

import json
import logging

import pytest

from mcpd.config.tables.model import NamingConfig
from mcpd.config.tables.servertable import ToolsConfig
from mcpd.registry.naming.spelling import hashed_name
from mcpd.registry.tables.catalog import Catalog
from mcpd.registry.tables.prompts import PromptTable
from mcpd.registry.uris.resources import ResourceTable
from mcpd.registry.uris.scheme import Ambiguous, Routed, wrap
from protocol.mcp import features
from protocol.mcp.uri_templates import MAX_EXPRESSIONS


def prompts(*names: str) -> list[features.Prompt]:
    return [features.Prompt(name=n, description=f"about {n}") for n in names]


def listed(table: PromptTable) -> list[dict[str, object]]:
    return [json.loads(bytes(raw)) for raw in table.listing()]


def test_prompts_are_named_like_tools_and_routed_back_by_the_table() -> None:
    table = PromptTable(NamingConfig())
    table.update("notes", prompts("daily", "weekly.review"))
    table.update("git", prompts("daily"))
    names = [p["name"] for p in listed(table)]
    assert names == ["mcp__git__daily", "mcp__notes__daily", "mcp__notes__weekly_review"]
    entry = table.lookup("mcp__notes__weekly_review")
    assert entry is not None and (entry.alias, entry.original) == ("notes", "weekly.review")
    first = listed(table)[1]
    assert first["description"] == "[notes] about daily"
    assert first["_meta"] == {
        "mcpd/server": "notes",
        "mcpd/originalName": "daily",
        "mcpd/available": True,
    }


def test_a_prompt_name_too_long_or_shared_ends_in_a_stable_hash() -> None:
    naming = NamingConfig(max_length=20)
    table = PromptTable(naming)
    table.update("notes", prompts("a_very_long_prompt_name"))
    [name] = [p["name"] for p in listed(table)]
    assert len(name) <= 20
    assert name == hashed_name(
        "mcp__notes__a_very_long_prompt_name", "notes", "a_very_long_prompt_name", 20
    )
    # Two prompts that sanitize to the same name both get hashes, not one each.
    table = PromptTable(NamingConfig())
    table.update("s", prompts("a.b", "a_b"))
    names = sorted(p["name"] for p in listed(table))
    assert all(n.startswith("mcp__s__a_b_") for n in names) and len(set(names)) == 2
    assert table.lookup(names[0]) is not None


def test_prompt_curation_allows_denies_renames_and_describes() -> None:
    table = PromptTable(NamingConfig())
    rules = ToolsConfig(
        allow=["d*", "w*"],
        deny=["weekly"],
        rename={"daily": "today"},
        description={"daily": "What to do today."},
    )
    table.set_rules("notes", rules)
    table.update("notes", prompts("daily", "weekly", "draft", "other"))
    shown = {p["name"]: p for p in listed(table)}
    assert set(shown) == {"mcp__notes__today", "mcp__notes__draft"}
    assert shown["mcp__notes__today"]["description"] == "[notes] What to do today."
    entry = table.lookup("mcp__notes__today")
    assert entry is not None and entry.original == "daily"


def test_a_down_servers_prompts_stay_listed_and_marked() -> None:
    table = PromptTable(NamingConfig())
    table.update("notes", prompts("daily"))
    before = table.version
    assert table.set_availability("notes", False, "unavailable: notes is down since 10:00:00")
    [p] = listed(table)
    assert p["description"] == "[unavailable: notes is down since 10:00:00] [notes] about daily"
    assert p["_meta"]["mcpd/available"] is False  # type: ignore[index]
    assert table.version > before
    assert not table.set_availability("notes", False, "unavailable: notes is down since 10:00:00")


def resources(*uris: str) -> list[features.Resource]:
    return [features.Resource(uri=u, name=u.rsplit("/", 1)[-1]) for u in uris]


def templates(*ts: str) -> list[features.ResourceTemplate]:
    return [features.ResourceTemplate(uriTemplate=t, name="t") for t in ts]


def listed_uris(table: ResourceTable) -> list[str]:
    return [json.loads(bytes(r))["uri"] for r in table.listing()]


def test_a_uri_one_server_lists_stays_as_the_server_wrote_it() -> None:
    table = ResourceTable()
    table.update("a", resources("file:///README.md", "file:///a.txt"), [])
    table.update("b", resources("file:///b.txt"), [])
    assert listed_uris(table) == ["file:///README.md", "file:///a.txt", "file:///b.txt"]
    assert table.routes.route("file:///a.txt") == Routed("a", "file:///a.txt")
    assert table.routes.route("file:///b.txt") == Routed("b", "file:///b.txt")


def test_colliding_uris_are_both_rewritten_and_the_plain_one_is_refused() -> None:
    table = ResourceTable()
    table.update("a", resources("file:///README.md"), [])
    table.update("b", resources("file:///README.md", "file:///b.txt"), [])
    assert listed_uris(table) == [
        "mcpd://a/file:///README.md",
        "mcpd://b/file:///README.md",
        "file:///b.txt",
    ]
    assert table.routes.route("mcpd://a/file:///README.md") == Routed("a", "file:///README.md")
    assert table.routes.route("mcpd://b/file:///README.md") == Routed("b", "file:///README.md")
    assert table.routes.route("file:///README.md") == Ambiguous(
        ["mcpd://a/file:///README.md", "mcpd://b/file:///README.md"]
    )
    meta = json.loads(bytes(table.listing()[0]))["_meta"]
    assert meta["mcpd/originalUri"] == "file:///README.md"
    # The mcpd:// form keeps working once the collision is gone.
    table.remove("b")
    assert listed_uris(table) == ["file:///README.md"]
    assert table.routes.route("mcpd://a/file:///README.md") == Routed("a", "file:///README.md")


def test_the_mcpd_form_is_reversible_character_for_character() -> None:
    table = ResourceTable()
    table.update("a", resources("db://x?q=1#frag"), [])
    table.update("b", resources("db://x?q=1#frag"), [])
    odd = "db://x?q=1#frag"
    assert table.routes.route(wrap("a", odd)) == Routed("a", odd)
    # A server's own mcpd:// URI is never taken for ours.
    table.update("c", resources("mcpd://a/elsewhere"), [])
    assert table.routes.links("c")("mcpd://a/elsewhere") == "mcpd://c/mcpd://a/elsewhere"
    assert table.routes.route("mcpd://c/mcpd://a/elsewhere") == Routed("c", "mcpd://a/elsewhere")
    assert table.routes.route("mcpd://nobody/x") is None


def test_templates_that_could_claim_the_same_uri_are_rewritten() -> None:
    table = ResourceTable()
    table.update("a", [], templates("file:///{name}", "demo://text/{id}"))
    table.update("b", [], templates("file:///{name}", "demo://blob/{id}"))
    shown = [json.loads(bytes(r))["uriTemplate"] for r in table.template_listing()]
    assert shown == [
        "mcpd://a/file:///{name}",
        "demo://text/{id}",
        "mcpd://b/file:///{name}",
        "demo://blob/{id}",
    ]
    # Expansions of a plain template go to its server, of a rewritten one by prefix.
    assert table.routes.route("demo://blob/7") == Routed("b", "demo://blob/7")
    assert table.routes.route("mcpd://b/file:///x.txt") == Routed("b", "file:///x.txt")
    assert table.routes.template_route("mcpd://a/file:///{name}") == ("a", "file:///{name}")
    assert table.routes.template_route("demo://text/{id}") == ("a", "demo://text/{id}")
    # The servers' own form of a shared template (as a tool's text may give it): which
    # to read instead, not "not found".
    assert table.routes.route("file:///x.txt") == Ambiguous(
        ["mcpd://a/file:///x.txt", "mcpd://b/file:///x.txt"]
    )


def test_a_template_matching_another_servers_listed_uri_is_rewritten() -> None:
    table = ResourceTable()
    table.update("a", resources("file:///README.md"), [])
    table.update("b", [], templates("file:///{name}"))
    shown = [json.loads(bytes(r))["uriTemplate"] for r in table.template_listing()]
    assert shown == ["mcpd://b/file:///{name}"]
    assert table.routes.route("file:///README.md") == Routed("a", "file:///README.md")


def test_uris_in_results_are_handed_over_so_reading_them_comes_back() -> None:
    table = ResourceTable()
    table.update("a", resources("file:///README.md"), templates("demo://text/{id}"))
    table.update("b", resources("file:///README.md"), [])
    assert table.routes.links("a")("demo://text/3") == "demo://text/3"
    assert table.routes.links("b")("demo://text/3") == "mcpd://b/demo://text/3"
    assert table.routes.links("a")("file:///README.md") == "mcpd://a/file:///README.md"
    assert table.routes.links("a")("file:///unknown") == "mcpd://a/file:///unknown"
    for alias, uri in (("a", "demo://text/3"), ("b", "demo://text/3"), ("a", "file:///unknown")):
        assert table.routes.route(table.routes.links(alias)(uri)) == Routed(alias, uri)


def test_with_one_server_every_uri_is_its_own() -> None:
    table = ResourceTable()
    table.update("only", resources("test://static-text"), [])
    assert table.routes.route("test://never-listed") == Routed("only", "test://never-listed")
    assert table.routes.links("only")("anything://x") == "anything://x"
    table.update("other", [], [])
    assert table.routes.route("test://never-listed") is None


def test_the_catalog_marks_and_removes_all_three_tables_together() -> None:
    catalog = Catalog(NamingConfig())
    catalog.prompts.update("s", prompts("p"))
    catalog.resources.update("s", resources("x://r"), [])
    catalog.set_availability("s", False, "unavailable: s is down")
    assert json.loads(bytes(catalog.prompts.listing()[0]))["_meta"]["mcpd/available"] is False
    resource = json.loads(bytes(catalog.resources.listing()[0]))
    assert resource["description"].startswith("[unavailable: s is down] [s]")
    catalog.remove("s")
    assert catalog.prompts.listing() == [] and catalog.resources.listing() == []


def test_a_template_mcpd_cannot_match_is_shown_in_the_mcpd_form_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    too_many = "x://" + "{a}" * (MAX_EXPRESSIONS + 1)
    table = ResourceTable()
    with caplog.at_level(logging.WARNING, logger="mcpd.registry"):
        table.update("a", [], templates(too_many, "file:///{name}", "x://{"))
    shown = [json.loads(bytes(r))["uriTemplate"] for r in table.template_listing()]
    assert shown == [wrap("a", too_many), "file:///{name}", wrap("a", "x://{")]
    [record] = caplog.records
    message = record.getMessage()
    assert message.startswith("a: ") and "expressions" in message and "1 more" in message
    assert record.mcpd_server == "a"
    # It claims no URI and overlaps no other server's template, which stays as it is.
    table.update("b", [], templates("x://{id}"))
    assert table.routes.route("x://abc") == Routed("b", "x://abc")
    assert table.routes.agent_template("b", "x://{id}") == "x://{id}"
    # Whatever an agent makes of its mcpd:// form reaches its server.
    assert table.routes.route(wrap("a", "x://abc")) == Routed("a", "x://abc")
    assert table.routes.template_route(wrap("a", too_many)) == ("a", too_many)
