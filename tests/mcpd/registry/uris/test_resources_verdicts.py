"""A profile's verdicts on what servers list (``Sight.rules``): each URI and template
a list holds is judged once, for every agent of the rules that judged it, and a URI or
template a server's changed list holds anew is judged then."""

from __future__ import annotations

from collections.abc import Hashable

from mcpd.registry.uris.resources import ResourceTable
from tests.support.uris.resource_lists import Shows, listed, resources, templates


class Counted(Shows):
    """``Shows``, with each URI or template it is asked about."""

    def __init__(self, *aliases: str, hidden: tuple[str, ...] = ()) -> None:
        super().__init__(*aliases, hidden=hidden)
        self.asked: list[tuple[str, str]] = []

    def admits_resource(self, alias: str, uri: str) -> bool:
        self.asked.append((alias, uri))
        return super().admits_resource(alias, uri)

    def rules(self) -> Hashable:
        return frozenset(self.aliases), frozenset(self.hidden)


def shown(table: ResourceTable, sight: Shows) -> tuple[list[object], list[bytes]]:
    return listed(table, sight), [bytes(t) for t in table.template_listing(sight)]


def test_each_listed_uri_and_template_is_judged_once() -> None:
    table = ResourceTable()
    table.update("a", resources("file:///x", "file:///y"), templates("n://{id}"))
    table.update("b", resources("file:///x"), templates("n://{id}"))
    sight = Counted("a", "b", hidden=("file:///y",))
    first = shown(table, sight)
    assert first == shown(table, Shows("a", "b", hidden=("file:///y",)))
    for _ in range(3):
        assert shown(table, sight) == first
    # Another agent of the same rules is shown the same, judged by none of its own.
    alike = Counted("a", "b", hidden=("file:///y",))
    assert shown(table, alike) == first and alike.asked == []
    judged = [(a, u) for a in "ab" for u in ("file:///x", "n://{id}")] + [("a", "file:///y")]
    assert sorted(sight.asked) == sorted(judged)
    # Other rules are judged by their own.
    other = Counted("a", "b")
    assert shown(table, other) == shown(table, Shows("a", "b"))
    assert len(other.asked) == len(judged)
    # A server's lists changed: what they hold anew is judged, what they held before
    # is not judged again, nor is another server's.
    table.update("a", resources("file:///x", "file:///z"), templates("n://{id}", "n://{k}/"))
    sight.asked.clear()
    assert shown(table, sight) == shown(table, Shows("a", "b", hidden=("file:///y",)))
    assert sorted(sight.asked) == [("a", "file:///z"), ("a", "n://{k}/")]
    # What it dropped is no longer kept: listed again, it is judged again.
    table.update("a", resources("file:///y"), [])
    sight.asked.clear()
    shown(table, sight)
    assert sight.asked == [("a", "file:///y")]
