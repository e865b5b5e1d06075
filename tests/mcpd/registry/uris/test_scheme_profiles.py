"""The URI scheme through a profile (no I/O): for the agents of a profile, the
servers it does not show list nothing and claim nothing. Whatever URI or template a
profile's agents are handed reads back, through that profile, to the server it came
from; no answer they get names a server the profile does not show; and a URI that
only hidden servers make ambiguous is the shown server's, plainly."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import Raw

from mcpd.registry.uris.resources import ResourceTable
from mcpd.registry.uris.scheme import Ambiguous, Routed, Sight, Undecided, wrap
from protocol.mcp import features

ALIASES = ("a", "b", "c")
URIS = ("file:///README.md", "file:///x", "n://1", "n://22", "t://k")
TEMPLATES = ("n://{id}", "file:///{name}", "t://{k}", "n://2{rest}")


class Shows(Sight):
    """A profile that shows some servers, and of them what ``deny`` does not name."""

    def __init__(self, aliases: set[str], deny: frozenset[tuple[str, str]] = frozenset()) -> None:
        self.aliases = aliases
        self.deny = deny

    def has_server(self, alias: str) -> bool:
        return alias in self.aliases

    def admits_resource(self, alias: str, uri: str) -> bool:
        return alias in self.aliases and (alias, uri) not in self.deny


def fill(table: ResourceTable, lists: dict[str, tuple[list[str], list[str]]]) -> None:
    for alias, (uris, templates) in lists.items():
        table.update(
            alias,
            [features.Resource(uri=u, name=u) for u in uris],
            [features.ResourceTemplate(uriTemplate=t, name=t) for t in templates],
        )


def shown(raws: list[Raw], key: str) -> list[tuple[str, str, str]]:
    """(server, its own URI or template, what agents are handed) per listed item."""
    out = []
    for raw in raws:
        item = json.loads(bytes(raw))
        meta = item["_meta"]
        own = meta.get(f"mcpd/original{key[0].upper()}{key[1:]}", item[key])
        out.append((meta["mcpd/server"], own, item[key]))
    return out


def test_a_uri_a_hidden_server_lists_too_is_the_shown_servers() -> None:
    table = ResourceTable()
    readme = "file:///README.md"
    fill(table, {"a": ([readme], ["n://{id}"]), "b": ([readme], ["n://{id}"]), "c": ([], [])})
    profile = Shows({"a", "c"})
    assert table.routes.route(readme, sight=profile) == Routed("a", readme)
    assert table.routes.route("n://3", sight=profile) == Routed("a", "n://3")
    assert shown(table.listing(profile), "uri") == [("a", readme, readme)]
    templates = shown(table.template_listing(profile), "uriTemplate")
    assert templates == [("a", "n://{id}", "n://{id}")]
    assert table.routes.template_route("n://{id}", profile) == ("a", "n://{id}")
    assert table.routes.links("a", profile)(readme) == readme
    # The owner's forms and errors are what they were.
    assert table.routes.route(readme) == Ambiguous([wrap("a", readme), wrap("b", readme)])
    assert table.routes.route("n://3") == Ambiguous([wrap("a", "n://3"), wrap("b", "n://3")])
    assert [s for _, _, s in shown(table.listing(), "uri")] == [
        wrap("a", readme),
        wrap("b", readme),
    ]
    assert table.routes.links("a")(readme) == wrap("a", readme)
    assert table.routes.template_route("n://{id}") == Ambiguous(
        [wrap("a", "n://{id}"), wrap("b", "n://{id}")]
    )


def test_candidates_are_the_shown_servers_and_a_denied_uri_is_none_of_them() -> None:
    table = ResourceTable()
    uri = "file:///x"
    fill(table, {alias: ([uri], []) for alias in ALIASES})
    assert table.routes.route(uri, sight=Shows({"a", "b"})) == Ambiguous(
        [wrap("a", uri), wrap("b", uri)]
    )
    assert table.routes.route(uri, sight=Shows({"a", "b"}, frozenset({("b", uri)}))) == Routed(
        "a", uri
    )
    # Only one server shown: everything is its, as if it were the only server.
    assert table.routes.route("elsewhere://y", sight=Shows({"c"})) == Routed("c", "elsewhere://y")
    assert table.routes.route("elsewhere://y", sight=Shows({"b", "c"})) is None


lists = st.fixed_dictionaries(
    {
        alias: st.tuples(
            st.lists(st.sampled_from(URIS), max_size=3, unique=True),
            st.lists(st.sampled_from(TEMPLATES), max_size=2, unique=True),
        )
        for alias in ALIASES
    }
)
sights = st.builds(
    Shows,
    st.sets(st.sampled_from(ALIASES)),
    st.frozensets(st.tuples(st.sampled_from(ALIASES), st.sampled_from(URIS + TEMPLATES))),
)


@settings(max_examples=300, deadline=None)
@given(lists, sights)
def test_what_a_profile_is_handed_reads_back_through_it_and_names_no_hidden_server(
    servers: dict[str, tuple[list[str], list[str]]], profile: Shows
) -> None:
    table = ResourceTable()
    fill(table, servers)
    hidden = [a for a in ALIASES if not profile.has_server(a)]
    for alias, own, handed in shown(table.listing(profile), "uri"):
        assert profile.admits_resource(alias, own)
        assert table.routes.route(handed, sight=profile) == Routed(alias, own)
        # Plain exactly when reading the plain URI through the profile reaches it.
        plain = table.routes.route(own, sight=profile) == Routed(alias, own)
        assert (handed == own) == plain
        assert table.routes.links(alias, profile)(own) == handed
    for alias, own, handed in shown(table.template_listing(profile), "uriTemplate"):
        assert profile.admits_resource(alias, own)
        assert table.routes.template_route(handed, profile) == (alias, own)
    for uri in (*URIS, "n://5", "file:///y", "other://z"):
        routed = table.routes.route(uri, sight=profile)
        if isinstance(routed, Routed):
            assert routed.alias not in hidden
        elif isinstance(routed, Ambiguous):
            assert all(
                not c.startswith(tuple(wrap(a, "") for a in hidden)) for c in routed.candidates
            )
        else:
            assert routed is None or isinstance(routed, Undecided)
