"""Finding the resource templates that may claim a URI: exactly the templates whose
literal prefix starts the URI (checked against trying every template), each server
named once, and a lookup that stops, saying so, when its budget is spent."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mcpd.registry.uris.claims import Budget, Claim
from mcpd.registry.uris.routing import PrefixIndex, claimants
from protocol.mcp import uri_templates

BIG = 1_000_000


def claim(alias: str, template: str) -> Claim:
    return Claim(alias, uri_templates.parse(template))


def found(index: PrefixIndex, uri: str) -> list[tuple[str, str]]:
    claims = index.find(uri, Budget(BIG))
    assert claims is not None
    return sorted((c.alias, c.template.text) for c in claims)


CLAIMS = [
    claim("files", "file:///{path}"),
    claim("home", "file:///home/{user}/{path}"),
    claim("home2", "file:///home/{user}"),
    claim("repo", "repo://{owner}/{name}"),
    claim("reports", "repo://reports/{id}"),
    claim("any", "{scheme}://{rest}"),
]


def test_the_templates_whose_prefix_starts_the_uri_are_found() -> None:
    index = PrefixIndex(CLAIMS)
    assert found(index, "file:///home/ann/notes.txt") == [
        ("any", "{scheme}://{rest}"),
        ("files", "file:///{path}"),
        ("home", "file:///home/{user}/{path}"),
        ("home2", "file:///home/{user}"),
    ]
    assert found(index, "file:///etc/hosts") == [
        ("any", "{scheme}://{rest}"),
        ("files", "file:///{path}"),
    ]
    assert found(index, "repo://reports/7") == [
        ("any", "{scheme}://{rest}"),
        ("repo", "repo://{owner}/{name}"),
        ("reports", "repo://reports/{id}"),
    ]


def test_a_uri_before_every_prefix_finds_only_the_empty_prefix() -> None:
    index = PrefixIndex(CLAIMS)
    assert found(index, "a") == [("any", "{scheme}://{rest}")]
    assert PrefixIndex([claim("x", "zz://{a}")]).find("a", Budget(BIG)) == []


def test_a_prefix_that_sorts_between_but_does_not_start_the_uri_is_passed_over() -> None:
    # "file:///home/ann/" sorts between "file:///home/" and "file:///home/bob/x" and
    # does not start it: the lookup must go on to its parent, not stop or take it.
    index = PrefixIndex([claim("home", "file:///home/{p}"), claim("ann", "file:///home/ann/{p}")])
    assert found(index, "file:///home/bob/x") == [("home", "file:///home/{p}")]
    assert found(index, "file:///home/ann/x") == [
        ("ann", "file:///home/ann/{p}"),
        ("home", "file:///home/{p}"),
    ]


def test_no_templates_find_nothing_at_no_cost() -> None:
    budget = Budget(0)
    assert PrefixIndex([]).find("file:///x", budget) == []
    assert not budget.out


def test_a_lookup_stops_and_says_so_when_its_budget_is_spent() -> None:
    index = PrefixIndex(CLAIMS)
    budget = Budget(2)
    assert index.find("file:///home/ann/x", budget) is None
    assert budget.out
    # Enough for the bisection but not for comparing the nearest prefix.
    need = len(CLAIMS).bit_length() + 1
    budget = Budget(need + 3)
    assert index.find("file:///home/ann/x", budget) is None and budget.out


def test_a_lookup_with_enough_budget_draws_what_it_cost() -> None:
    index = PrefixIndex(CLAIMS)
    budget = Budget(BIG)
    index.find("file:///home/ann/x", budget)
    assert 0 < budget.spent == BIG - budget.left
    assert not budget.out


def test_claimants_are_the_servers_whose_templates_match_each_named_once() -> None:
    index = PrefixIndex(
        [
            claim("files", "file:///{path}"),
            claim("files", "file:///{+path}"),
            claim("home", "file:///home/{user}"),
            claim("other", "other://{x}"),
        ]
    )
    # {path} does not take "/", {+path} does: one of files' two templates matches.
    assert claimants(index, "file:///a/b", Budget(BIG)) == ["files"]
    assert claimants(index, "file:///home/ann", Budget(BIG)) == ["files", "home"]
    assert claimants(index, "nothing:here", Budget(BIG)) == []


def test_claimants_stop_when_the_budget_is_spent_while_matching() -> None:
    index = PrefixIndex([claim("a", "x://{p}"), claim("b", "x://{q}")])
    budget = Budget(BIG)
    assert claimants(index, "x://1", budget) == ["a", "b"]
    cost = budget.spent
    short = Budget(cost - 1)
    assert claimants(index, "x://1", short) is None
    assert short.out


prefix_text = st.text(alphabet="ab/:", max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("xyz"), prefix_text), max_size=12),
    st.text(alphabet="ab/:", max_size=8),
)
def test_find_is_every_template_whose_prefix_starts_the_uri(
    pairs: list[tuple[str, str]], uri: str
) -> None:
    claims = [claim(alias, prefix + "{v}") for alias, prefix in pairs]
    expected = sorted(
        (c.alias, c.template.text) for c in claims if uri.startswith(c.template.prefix)
    )
    assert found(PrefixIndex(claims), uri) == expected
