"""Where an agent's URIs and templates go, through the resource table: a malformed
``mcpd://`` URI names no server, and a profile's sight routes among the servers it
shows, each of many sights with an answer of its own."""

from __future__ import annotations

from mcpd.registry.uris.resources import ResourceTable
from mcpd.registry.uris.scheme import Ambiguous, Routed, wrap
from tests.support.uris.resource_lists import Shows, listed_templates, resources, templates

# -- the mcpd:// form --


def test_a_malformed_mcpd_uri_names_no_server() -> None:
    table = ResourceTable()
    table.update("a", resources("x://1"), [])
    table.update("b", resources("y://1"), [])
    for uri in ("mcpd://a", "mcpd://../x", "mcpd:///x", "mcpd://a b/x"):
        assert table.routes.route(uri) is None, uri


# -- what one agent's sight routes --


def test_a_sight_routes_templates_among_the_servers_it_shows() -> None:
    table = ResourceTable()
    table.update("a", [], templates("file:///{name}"))
    table.update("b", [], templates("file:///{name}"))
    table.update("c", resources("c://1"), [])
    both = Shows("a", "b", "c")
    assert table.routes.route("file:///x", sight=both) == Ambiguous(
        [wrap("a", "file:///x"), wrap("b", "file:///x")]
    )
    only_a = Shows("a", "c")
    assert table.routes.route("file:///x", sight=only_a) == Routed("a", "file:///x")
    assert [t["uriTemplate"] for t in listed_templates(table, only_a)] == ["file:///{name}"]
    assert table.routes.agent_template("a", "file:///{name}", only_a) == "file:///{name}"
    assert table.routes.agent_template("a", "file:///{name}") == wrap("a", "file:///{name}")
    assert table.routes.template_route("file:///{name}", only_a) == ("a", "file:///{name}")
    assert table.routes.template_route("file:///{name}") == Ambiguous(
        [wrap("a", "file:///{name}"), wrap("b", "file:///{name}")]
    )


def test_many_different_sights_each_get_their_own_answer() -> None:
    table = ResourceTable()
    aliases = [f"s{i:02}" for i in range(12)]
    for alias in aliases:
        table.update(alias, [], templates("file:///{name}"))
    # More sets of servers than are kept: each still routes as its sight says.
    for i, first in enumerate(aliases):
        for second in aliases[i + 1 :]:
            pair = Shows(first, second)
            assert table.routes.route("file:///x", sight=pair) == Ambiguous(
                [wrap(first, "file:///x"), wrap(second, "file:///x")]
            )
            assert [t["uriTemplate"] for t in listed_templates(table, pair)] == [
                wrap(first, "file:///{name}"),
                wrap(second, "file:///{name}"),
            ]
            alone = Shows(second)
            assert table.routes.route("file:///x", sight=alone) == Routed(second, "file:///x")
            assert table.routes.agent_template(second, "file:///{name}", alone) == "file:///{name}"
