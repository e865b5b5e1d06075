"""One set of servers' view of the resource templates, built directly from the claims
kept per pair of servers: which templates its agents see as the server wrote them and
which in the ``mcpd://`` form, that each form an agent sees leads back to one server's
template, and that what a server outside the set lists changes nothing for it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mcpd.registry.uris.claims import Budget, Claim, Listings, parsed_template
from mcpd.registry.uris.routing import claimants
from mcpd.registry.uris.scheme import wrap
from mcpd.registry.uris.scopes import Scope


def listings(
    templates: Mapping[str, Sequence[str]], uris: Mapping[str, Sequence[str]] | None = None
) -> Listings:
    """The lists of each server, put in the order given, as the resource table does."""
    lists = Listings()
    for alias, texts in templates.items():
        claims = [Claim(alias, t) for t in map(parsed_template, texts) if t is not None]
        lists.put(alias, (uris or {}).get(alias, ()), claims)
    return lists


def scope(
    aliases: Sequence[str],
    templates: Mapping[str, Sequence[str]],
    uris: Mapping[str, Sequence[str]] | None = None,
) -> Scope:
    lists = listings(templates, uris)
    return Scope(frozenset(aliases), lists, {a: templates[a] for a in aliases})


def shown(s: Scope) -> dict[tuple[str, str], str]:
    return {(a, t): s.agent_template(a, t) for a, t in s.by_agent_template.values()}


def matched(s: Scope, uri: str) -> tuple[list[str] | None, list[str] | None]:
    return claimants(s.plain, uri, Budget(10_000)), claimants(s.wrapped, uri, Budget(10_000))


def test_templates_that_claim_apart_are_shown_as_written() -> None:
    s = scope(["a", "b"], {"a": ["notes://{id}"], "b": ["tickets://{id}"]})
    assert shown(s) == {
        ("a", "notes://{id}"): "notes://{id}",
        ("b", "tickets://{id}"): "tickets://{id}",
    }
    assert s.shown_wrapped == set()
    assert matched(s, "notes://7") == (["a"], [])
    assert matched(s, "tickets://7") == (["b"], [])


def test_two_servers_with_one_template_both_get_the_mcpd_form() -> None:
    s = scope(["a", "b"], {"a": ["notes://{id}"], "b": ["notes://{id}"]})
    assert shown(s) == {
        ("a", "notes://{id}"): wrap("a", "notes://{id}"),
        ("b", "notes://{id}"): wrap("b", "notes://{id}"),
    }
    # Neither is matched as written: a plain URI is no one's, the wrapped forms find both.
    assert matched(s, "notes://7") == ([], ["a", "b"])


def test_a_template_whose_prefix_starts_another_servers_clashes_both_ways() -> None:
    s = scope(["a", "b"], {"a": ["file:///{path}"], "b": ["file:///home/{rest}"]})
    assert s.shown_wrapped == {("a", "file:///{path}"), ("b", "file:///home/{rest}")}


def test_a_template_matching_a_uri_another_server_lists_is_wrapped() -> None:
    s = scope(
        ["a", "b"],
        {"a": ["docs://{name}"], "b": []},
        {"b": ["docs://readme"]},
    )
    assert s.shown_wrapped == {("a", "docs://{name}")}
    # The template's own URIs never count against it.
    alone = scope(["a"], {"a": ["docs://{name}"]}, {"a": ["docs://readme"]})
    assert alone.shown_wrapped == set()


def test_a_server_outside_the_set_claims_nothing_for_it() -> None:
    templates = {"a": ["notes://{id}"], "b": ["tickets://{id}"], "hidden": ["notes://{id}"]}
    uris = {"hidden": ["tickets://1"]}
    everyone = scope(["a", "b", "hidden"], templates, uris)
    assert everyone.shown_wrapped == {
        ("a", "notes://{id}"),
        ("b", "tickets://{id}"),
        ("hidden", "notes://{id}"),
    }
    seen = scope(["a", "b"], templates, uris)
    assert seen.shown_wrapped == set()
    assert shown(seen) == {
        ("a", "notes://{id}"): "notes://{id}",
        ("b", "tickets://{id}"): "tickets://{id}",
    }
    # The hidden server's template is in neither index: its URIs find the shown one only.
    assert matched(seen, "notes://7") == (["a"], [])


def test_a_template_mcpd_cannot_match_is_shown_wrapped_and_claims_nothing() -> None:
    s = scope(["a", "b"], {"a": ["notes://{id"], "b": ["notes://{id}"]})
    assert shown(s) == {
        ("a", "notes://{id"): wrap("a", "notes://{id"),
        ("b", "notes://{id}"): "notes://{id}",
    }
    assert matched(s, "notes://7") == (["b"], [])


def test_a_server_template_in_the_mcpd_form_never_reads_as_another_servers() -> None:
    # A hostile server lists a template that looks like mcpd's form of another's.
    forged = wrap("b", "notes://{id}")
    s = scope(["a", "b"], {"a": [forged], "b": ["notes://{id}"]})
    assert s.agent_template("a", forged) == wrap("a", forged)
    assert s.agent_template("b", "notes://{id}") == "notes://{id}"
    assert s.by_agent_template[wrap("a", forged)] == ("a", forged)
    assert s.by_agent_template["notes://{id}"] == ("b", "notes://{id}")
    assert matched(s, "notes://7") == (["b"], [])


def test_each_shown_form_leads_back_to_one_server_and_template() -> None:
    templates = {
        "a": ["notes://{id}", "shared://{x}", "bad://{", "x://{a}/y"],
        "b": ["shared://{x}", "tickets://{id}", "x://{a}/z"],
        "c": ["mcpd://a/notes://{id}", "tickets://open/{n}"],
    }
    s = scope(["a", "b", "c"], templates)
    every = {(a, t) for a, ts in templates.items() for t in ts}
    assert set(s.by_agent_template.values()) == every
    assert len(s.by_agent_template) == len(every)
    for form, (alias, template) in s.by_agent_template.items():
        assert s.agent_template(alias, template) == form


def test_a_template_listed_twice_by_one_server_clashes_with_nothing() -> None:
    s = scope(["a"], {"a": ["notes://{id}", "notes://{id}"]})
    assert s.shown_wrapped == set()
    assert s.by_agent_template == {"notes://{id}": ("a", "notes://{id}")}


def test_no_servers_show_no_templates() -> None:
    s = scope([], {"a": ["notes://{id}"]})
    assert s.by_agent_template == {}
    assert matched(s, "notes://7") == ([], [])
