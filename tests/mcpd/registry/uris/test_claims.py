"""Which resource templates clash, and what routing a URI costs, however many
templates a server lists: the sweep against the pairwise definition, and step counts
against the budgets."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpd.registry.uris.claims import (
    REBUILD_STEPS,
    ROUTE_STEPS,
    Budget,
    Claim,
    claimed,
    overlapping,
)
from mcpd.registry.uris.resources import ResourceTable
from mcpd.registry.uris.scheme import Routed, Undecided, wrap
from protocol.mcp import features, uri_templates

# The slowest shape found for one template: expressions side by side that each take
# the characters the next one leads with.
WORST = "repo://" + "{/a}{.b}{;c}{&d}" * (uri_templates.MAX_EXPRESSIONS // 4 - 1)
HOSTILE_URI = "repo://" + "/.;&," * ((uri_templates.MAX_URI - 16) // 5) + "#"


def templates(*ts: str) -> list[features.ResourceTemplate]:
    return [features.ResourceTemplate(uriTemplate=t, name="t") for t in ts]


def claims(pairs: list[tuple[str, str]]) -> list[Claim]:
    return [Claim(alias, uri_templates.parse(template)) for alias, template in pairs]


def may_overlap(a: str, b: str) -> bool:
    """The pairwise definition: one template's literal prefix starts the other's."""
    pa, pb = a.split("{", 1)[0], b.split("{", 1)[0]
    return pa.startswith(pb) or pb.startswith(pa)


def pairwise(pairs: list[tuple[str, str]]) -> set[int]:
    return {
        i for i, (a, t) in enumerate(pairs) if any(b != a and may_overlap(t, u) for b, u in pairs)
    }


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        ("test://template/{id}/data", "test://template/{id}/data", True),
        ("file:///{name}", "file:///{+path}", True),
        ("file:///docs/{name}", "file:///{name}", True),  # one prefix starts the other
        ("demo://text/{id}", "demo://blob/{id}", False),
        ("a://{x}", "b://{x}", False),
    ],
)
def test_templates_of_two_servers_that_could_claim_one_uri_clash(
    a: str, b: str, overlap: bool
) -> None:
    for first, second in ((a, b), (b, a)):
        found = overlapping(claims([("x", first), ("y", second)]))
        assert found == ({0, 1} if overlap else set())


prefixes = st.text(alphabet="ab/:", max_size=5)
pairs_strategy = st.lists(
    st.tuples(st.sampled_from(["x", "y", "z"]), prefixes.map(lambda p: p + "{v}")),
    max_size=30,
)


@settings(max_examples=400, deadline=None)
@given(pairs_strategy)
def test_the_sweep_finds_the_clashes_every_pair_would(pairs: list[tuple[str, str]]) -> None:
    assert overlapping(claims(pairs)) == pairwise(pairs)


def test_the_sweep_on_nested_and_equal_prefixes() -> None:
    pairs = [("x", "a{v}"), ("x", "ab{v}"), ("y", "abc{v}"), ("x", "b{v}"), ("y", "b{w}")]
    assert overlapping(claims(pairs)) == {0, 1, 2, 3, 4}
    assert overlapping(claims([("x", "a{v}"), ("x", "ab{v}"), ("y", "b{v}")])) == set()


def test_only_uris_under_a_templates_prefix_are_matched() -> None:
    budget = Budget(1000)
    mine = claims([("x", "file:///{name}"), ("x", "note://{n}"), ("x", "doc://{n}/x")])
    assert claimed(mine, ["doc://1", "file:///a", "file:///b"], budget) == {0}
    assert budget.spent < 60


def hostile_table(count: int) -> ResourceTable:
    table = ResourceTable()
    table.update(
        "good", [features.Resource(uri="wiki://home", name="home")], templates("wiki://{p}")
    )
    table.update("evil", [], templates(*(f"{WORST}{{/x{i}}}" for i in range(count))))
    return table


def test_a_hostile_servers_templates_cost_a_route_no_more_than_its_budget(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = hostile_table(2000)
    before = table.routes.match_steps
    with caplog.at_level(logging.WARNING):
        routed = table.routes.route(HOSTILE_URI)
    spent = table.routes.match_steps - before
    assert isinstance(routed, Undecided)
    assert spent <= ROUTE_STEPS
    assert "more than" in caplog.text and "evil lists 2000 templates" in caplog.text
    # The link is handed over in the form that reads back to its server, at the same cost.
    before = table.routes.match_steps
    assert table.routes.links("evil")(HOSTILE_URI) == wrap("evil", HOSTILE_URI)
    assert table.routes.match_steps - before <= ROUTE_STEPS
    # The other server's URIs still route.
    assert table.routes.route("wiki://page") == Routed("good", "wiki://page")


def test_a_rebuild_costs_no_more_than_its_budget() -> None:
    table = ResourceTable()
    table.update("evil", [], templates(WORST))
    uris = [
        features.Resource(uri=HOSTILE_URI[: uri_templates.MAX_URI - i], name="r")
        for i in range(300)
    ]
    before = table.routes.match_steps
    table.update("good", uris, [])
    assert table.routes.match_steps - before <= REBUILD_STEPS
    # Undecided, the template is shown in the mcpd:// form, which still reaches its server.
    assert table.routes.agent_template("evil", WORST) == wrap("evil", WORST)


def test_a_single_server_gets_every_uri_without_matching() -> None:
    table = ResourceTable()
    table.update("only", [], templates(WORST))
    before = table.routes.match_steps
    assert table.routes.route(HOSTILE_URI) == Routed("only", HOSTILE_URI)
    assert table.routes.match_steps == before
