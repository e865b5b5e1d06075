"""What routing URIs and rebuilding the resource table cost, counted, for each shape
of list and result a hostile server can send: many short templates, very long ones,
long links under a template of many expressions, tens of thousands of links in one
result, thousands of resources under thousands of templates. Each cost is counted in
matching steps against a budget, and where the code counts nothing itself, in
bytecodes run (``tests.support.reading.work``)."""

from __future__ import annotations

import logging

import msgspec
import pytest

from mcpd.agents.calls.rewrite import tool_result
from mcpd.registry.uris.claims import REBUILD_STEPS, RESULT_STEPS, ROUTE_STEPS
from mcpd.registry.uris.resources import ResourceTable
from mcpd.registry.uris.scheme import Routed, wrap
from protocol.mcp import features, uri_templates
from tests.support.reading.work import bytecodes


def resources(*uris: str) -> list[features.Resource]:
    return [features.Resource(uri=u, name="r") for u in uris]


def templates(*ts: str) -> list[features.ResourceTemplate]:
    return [features.ResourceTemplate(uriTemplate=t, name="t") for t in ts]


def with_good(table: ResourceTable) -> ResourceTable:
    table.update("good", resources("file:///README.md"), templates("file:///{+path}"))
    return table


# -- 2,000 short templates --


def short_templates() -> ResourceTable:
    table = with_good(ResourceTable())
    table.update("evil", resources("h://a"), templates(*(f"h{i}://{{x}}" for i in range(2000))))
    return table


def test_a_uri_is_routed_without_looking_at_every_template() -> None:
    table = short_templates()
    for uri in ["zz://1", "h1999://x/", "file:///src/a.py", "h7://x"]:
        before = table.routes.match_steps
        with bytecodes(2000) as work:  # less than one per template
            table.routes.route(uri)
        assert work.count < 2000
        assert table.routes.match_steps - before <= 64
    assert table.routes.route("h7://x") == Routed("evil", "h7://x")
    assert table.routes.route("h1999://x/") is None  # {x} holds no "/"
    assert table.routes.route("file:///src/a.py") == Routed("good", "file:///src/a.py")


def test_nested_prefixes_are_all_found() -> None:
    table = with_good(ResourceTable())
    nested = [f"n://{'a' * i}{{+x}}" for i in range(300)]
    table.update("evil", resources("h://a"), templates(*nested))
    before = table.routes.match_steps
    assert table.routes.route("n://" + "a" * 150 + "b") == Routed("evil", "n://" + "a" * 150 + "b")
    # The lookup walks the chain of nested prefixes (one per length, 300 here) and
    # compares the URI with the longest once; then the longest that starts the URI
    # matches: a step per prefix and a few per character, not a match per template.
    assert table.routes.match_steps - before <= 300 + 3 * 160


# -- templates of 250 KB --


def test_a_template_longer_than_the_cap_claims_nothing_and_costs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = with_good(ResourceTable())
    big = ["x" * 250_000 + f"{i}{{x}}" for i in range(256)]
    with caplog.at_level(logging.WARNING):
        table.update("evil", resources("h://a"), templates(*big))
    assert "longer than 1024 characters" in caplog.text and "and 255 more" in caplog.text
    # Listed in the form that reads back to the server, which matches nothing.
    assert table.routes.agent_template("evil", big[7]) == wrap("evil", big[7])
    uri = "x" * 8000 + "7abc"
    before = table.routes.match_steps
    with bytecodes(2000) as work:
        assert table.routes.route(uri) is None
    assert table.routes.match_steps - before <= 64 and work.count < 2000
    assert table.routes.links("evil")(uri) == wrap("evil", uri)


# -- long links under a template of 32 expressions --

MANY = "e://" + "".join(f"{{+v{i}}}" for i in range(uri_templates.MAX_EXPRESSIONS)) + "X"


def test_the_links_of_one_result_share_one_budget(caplog: pytest.LogCaptureFixture) -> None:
    table = with_good(ResourceTable())
    table.update("evil", resources("h://a"), templates(MANY))
    links = ["e://" + "a" * 8000 + str(i) for i in range(250)]
    to_agent = table.routes.links("evil")
    before = table.routes.match_steps
    spent = []
    with caplog.at_level(logging.WARNING):
        for uri in links:
            assert to_agent(uri) == wrap("evil", uri)
            spent.append(table.routes.match_steps - before)
    assert spent[-1] <= RESULT_STEPS
    # Once the budget is spent, the rest are handed over without matching.
    assert spent.index(spent[-1]) <= RESULT_STEPS // ROUTE_STEPS + 1
    assert "the links of one result" in caplog.text
    # The next result has a budget of its own.
    before = table.routes.match_steps
    assert table.routes.links("evil")(links[0]) == wrap("evil", links[0])
    assert 0 < table.routes.match_steps - before <= ROUTE_STEPS


# -- 80,000 links in one result --


def test_tens_of_thousands_of_links_in_a_result_cost_one_budget() -> None:
    table = short_templates()
    uri = "h7://" + "a" * 100  # each one a match against evil's template
    content = [{"type": "resource_link", "uri": uri, "name": "x"} for _ in range(80_000)]
    raw = msgspec.Raw(msgspec.json.encode({"content": content}))
    before = table.routes.match_steps
    out = tool_result(raw, table.routes.links("evil"))
    assert table.routes.match_steps - before <= RESULT_STEPS
    assert isinstance(out, dict)
    shown = [block["uri"] for block in out["content"]]
    # As many as the budget allowed were matched and kept as the server wrote them;
    # the rest are in the mcpd:// form, which reads back to the same server.
    plain = shown.index(wrap("evil", uri))
    assert 1000 < plain < 80_000
    assert shown[:plain] == [uri] * plain
    assert set(shown[plain:]) == {wrap("evil", uri)}
    assert table.routes.route(wrap("evil", uri)) == Routed("evil", uri)


# -- 2,000 resources under 2,000 templates --


def own_lists(n: int, limit: int) -> int:
    """Bytecodes run listing ``n`` resources and ``n`` templates that all share one
    prefix, beside another server (failing past ``limit``)."""
    table = with_good(ResourceTable())
    own = resources(*(f"h://a/{i}" for i in range(n)))
    shapes = templates(*(f"h://a/{{x}}/{i}" for i in range(n)))
    before = table.routes.match_steps
    with bytecodes(limit) as work:
        table.update("evil", own, shapes)
    # A server's templates are never matched against its own URIs.
    assert table.routes.match_steps - before <= 4 * n
    return work.count


def test_a_rebuild_does_work_linear_in_the_lists() -> None:
    small = own_lists(500, 50_000_000)
    own_lists(2000, 8 * small)  # four times the lists: linear, not sixteen-fold


def test_another_server_listing_the_uris_costs_no_more_than_the_budget() -> None:
    table = with_good(ResourceTable())
    shapes = templates(*(f"h://a/{{x}}/{i}" for i in range(2000)))
    table.update("evil", [], shapes)
    before = table.routes.match_steps
    table.update("other", resources(*(f"h://a/{i}" for i in range(2000))), [])
    assert table.routes.match_steps - before <= REBUILD_STEPS


def test_a_change_rechecks_only_the_pairs_of_its_server() -> None:
    table = with_good(ResourceTable())
    table.update("evil", [], templates(MANY))
    costly = resources(*("e://" + "a" * 8000 + str(i) for i in range(300)))
    before = table.routes.match_steps
    table.update("lister", costly, [])
    assert table.routes.match_steps - before > REBUILD_STEPS // 4  # the pair took its budget
    before = table.routes.match_steps
    table.update("calm", resources("c://1"), templates("c://{n}"))
    table.update("good", resources("file:///README.md", "file:///b"), templates("file:///{+p}"))
    assert table.routes.match_steps - before <= 100
    # What was found before still holds: evil's template is shown in the mcpd:// form.
    assert table.routes.agent_template("evil", MANY) == wrap("evil", MANY)
    assert table.routes.agent_template("calm", "c://{n}") == "c://{n}"
