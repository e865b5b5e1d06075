"""A server's lists held to its limits, where the tests of the limits in use
(``test_limits_lists``) do not go: how an item too big is named whatever the server
sent, when a list is full, saved resources and templates, and what a fetch says."""

from __future__ import annotations

import msgspec
from msgspec import Raw

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import ListLimits
from mcpd.registry.gating.limits import (
    LISTED_URI_CHARS,
    LONG_URI,
    URIS_FULL,
    ListTrim,
    cut_text,
    limited_saved,
)
from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.mcp.uri_templates import MAX_URI


def limits(**keys: int) -> ListLimits:
    return parse_config({"servers": {"s": {"command": "x", **keys}}}, env={}).list_limits("s")


def raw(item: object) -> Raw:
    return Raw(msgspec.json.encode(item))


def too_big(data: bytes) -> str:
    """The reason an item of these bytes, over a limit of 12, is dropped with."""
    trim = ListTrim("s", "tools", "tools/list", limits(max_item_bytes=12))
    assert not trim.admit(Raw(data))
    assert trim.admit(raw({"name": "a"}))  # 12 bytes: the next one is still read
    (reason,) = trim.done().dropped
    return reason


# -- an item too big, named --


def test_an_item_too_big_is_named_by_what_names_it_in_its_list() -> None:
    assert too_big(msgspec.json.encode({"uri": "file:///a.md", "text": "x" * 20})).startswith(
        "file:///a.md: "
    )
    template = {"uriTemplate": "notes://{id}", "x": "y" * 20}
    assert too_big(msgspec.json.encode(template)).startswith("notes://{id}: ")
    # A name that is no text is passed over for one that is.
    assert too_big(msgspec.json.encode({"name": 7, "uri": "u", "x": "y" * 20})).startswith("u: ")


def test_an_item_too_big_that_names_nothing_is_an_item() -> None:
    for data in (
        b"[" + b"1," * 20 + b"1]",
        b'"' + b"x" * 20 + b'"',
        b'{"name": null, "text": "xxxxxxxxxxxxxxxxxxxx"}',
        b"not json at all, and long",
    ):
        assert (
            too_big(data)
            == f"(an item): {len(data)} bytes, over the limit of 12 (servers.s.max_item_bytes)"
        )


def test_an_item_too_big_nested_too_deep_to_read_is_an_item_not_an_error() -> None:
    # The page it came in was read, but reading the item again for its name is
    # deeper in the stack: at the limit's edge, a level short of it is too deep there.
    depth = 100_000
    data = b'{"a":' + b"[" * depth + b"]" * depth + b',"name":"deep"}'
    assert too_big(data).startswith("(an item): ")


# -- when a list is full --


def test_a_list_is_full_at_its_count_or_once_past_its_bytes() -> None:
    trim = ListTrim("s", "tools", "tools/list", limits(max_list_items=2))
    assert not trim.full
    assert trim.admit(raw({"name": "a"}))
    assert not trim.full
    assert trim.admit(raw({"name": "b"}))
    assert trim.full
    item = raw({"name": "x" * 90})  # 101 bytes
    trim = ListTrim("s", "tools", "tools/list", limits(max_list_bytes=150))
    assert trim.admit(item) and not trim.full
    assert not trim.admit(item) and trim.full


def test_past_the_lists_bytes_no_later_item_is_kept_however_small() -> None:
    trim = ListTrim("s", "resources", "resources/list", limits(max_list_bytes=150))
    assert trim.admit(raw({"uri": "x" * 90}))
    assert not trim.admit(raw({"uri": "y" * 90}))
    assert not trim.admit(raw({"uri": "z"}))  # would fit: a list has no holes
    done = trim.done()
    assert done.past == 2 and not done.unread
    assert done.dropped == [
        "2 resources dropped: the list reached its limit of 150 bytes (servers.s.max_list_bytes)"
    ]


def test_an_item_too_big_alone_counts_as_read_but_not_in_the_lists_bytes() -> None:
    trim = ListTrim(
        "s", "tools", "tools/list", limits(max_list_items=2, max_item_bytes=50, max_list_bytes=100)
    )
    big = raw({"name": "big", "x": "y" * 60})
    assert not trim.admit(big)
    assert trim.admit(raw({"name": "a" * 30}))  # 41 bytes: with the big one's, past 100
    assert trim.full
    assert not trim.admit(raw({"name": "b"}))
    assert trim.done().dropped == [
        "1 tools past the first 2 dropped (servers.s.max_list_items)",
        f"big: {len(big)} bytes, over the limit of 50 (servers.s.max_item_bytes)",
    ]


def test_two_fetches_that_drop_alike_sign_alike() -> None:
    def fetch(count: int, more: bool) -> bytes:
        trim = ListTrim("s", "tools", "tools/list", limits(max_list_items=3))
        for i in range(count):
            trim.admit(raw({"name": f"t{i}"}))
        if more:
            trim.stopped()
        return trim.signature()

    assert fetch(5, False) == fetch(5, False)
    assert fetch(5, False) != fetch(6, False)
    assert fetch(5, False) != fetch(5, True)
    assert fetch(2, False) == fetch(3, False)  # nothing dropped by either


# -- a text cut --


def test_a_text_of_exactly_the_limit_in_wide_characters_is_left_alone() -> None:
    assert cut_text("\U0001f600" * 25, 100) is None
    out = cut_text("\U0001f600" * 26, 100)
    assert out is not None and out[0].startswith("\U0001f600" * 25 + " [mcpd: ")


def test_a_limit_of_nothing_keeps_only_the_marker() -> None:
    assert cut_text("", 0) is None
    assert cut_text("abc", 0) == (" [mcpd: cut at 0 of 3 bytes]", 3)


# -- saved lists --


def test_saved_resources_and_templates_are_held_to_the_limits_and_named_by_uri() -> None:
    resources = [features.Resource(uri=f"file:///{i}.md", description="d" * 30) for i in range(3)]
    resources.insert(1, features.Resource(uri="file:///huge.md", description="h" * 500))
    lim = limits(max_item_bytes=200, max_description_bytes=10)
    kept = limited_saved("s", "resources", resources, lim)
    assert [r.uri for r in kept] == ["file:///0.md", "file:///1.md", "file:///2.md"]
    assert kept[0].description == "d" * 10 + " [mcpd: cut at 10 of 30 bytes]"
    templates = [features.ResourceTemplate(uriTemplate=f"t{i}://{{id}}") for i in range(4)]
    kept_templates = limited_saved("s", "resource_templates", templates, limits(max_list_items=2))
    assert [t.uriTemplate for t in kept_templates] == ["t0://{id}", "t1://{id}"]


def test_a_saved_item_is_measured_as_it_is_encoded() -> None:
    tool = mcp.Tool(name="t", description="x" * 100)
    size = len(msgspec.json.encode(tool))
    assert limited_saved("s", "tools", [tool], limits(max_item_bytes=size)) == [tool]
    assert limited_saved("s", "tools", [tool], limits(max_item_bytes=size - 1)) == []


def test_a_resource_or_template_whose_uri_hides_characters_is_dropped_saying_so() -> None:
    trim = ListTrim("s", "resources", "resources/list", limits())
    assert trim.addressable(features.Resource(uri="file:///a.md"))
    assert trim.addressable(features.Resource(uri="file:///caf\u00e9.md"))
    assert not trim.addressable(features.Resource(uri="file:///a.md\u200b"))
    assert not trim.addressable(features.ResourceTemplate(uriTemplate="t://{id}\x7f"))
    assert trim.addressable(mcp.Tool(name="t\u200b"))  # a tool is called by its local name
    assert trim.done().dropped == [
        "file:///a.md\\u200b: its URI holds invisible or control characters",
        "t://{id}\\x7f: its URI holds invisible or control characters",
    ]


def test_a_resource_or_template_whose_uri_is_past_the_bound_is_dropped_saying_so() -> None:
    longest = "file:///" + "a" * (MAX_URI - 8)
    uris = ["file:///a.md", longest + "b", longest, "file:///b.md"]
    resources = [features.Resource(uri=u) for u in uris]
    trim = ListTrim("s", "resources", "resources/list", limits())
    kept = [r.uri for r in resources if trim.addressable(r)]
    assert kept == ["file:///a.md", longest, "file:///b.md"]
    [why] = trim.done().dropped
    assert why.startswith("file:///aaa") and why.endswith(f"{LONG_URI} ({MAX_URI + 1:,})")
    shapes = ["t://{id}", "t://" + "{id}" * MAX_URI, "u://{id}"]
    templates = [features.ResourceTemplate(uriTemplate=t) for t in shapes]
    kept_templates = limited_saved("s", "resource_templates", templates, limits())
    assert [t.uriTemplate for t in kept_templates] == ["t://{id}", "u://{id}"]


def test_a_list_holds_uris_of_a_bounded_length_in_all() -> None:
    longest = "file:///" + "a" * (MAX_URI - 8)
    fit = LISTED_URI_CHARS // MAX_URI
    resources = [features.Resource(uri=longest) for _ in range(fit + 2)]
    resources.insert(fit, features.Resource(uri="file:///b.md"))
    trim = ListTrim("s", "resources", "resources/list", limits())
    kept = [r.uri for r in resources if trim.addressable(r)]
    assert kept == [longest] * fit
    assert [why.endswith(URIS_FULL) for why in trim.done().dropped] == [True] * 3


def test_a_saved_resource_whose_uri_hides_characters_is_dropped_too() -> None:
    saved = [features.Resource(uri="file:///a\u202e"), features.Resource(uri="file:///b")]
    assert limited_saved("s", "resources", saved, limits()) == saved[1:]


def test_the_rest_of_a_page_once_full_counts_as_each_item_would() -> None:
    each = ListTrim("s", "tools", "tools/list", limits(max_list_items=1))
    rest = ListTrim("s", "tools", "tools/list", limits(max_list_items=1))
    for trim in (each, rest):
        assert trim.admit(raw({"name": "a"}))
        assert not trim.admit(raw({"name": "b"})) and trim.full
    for name in "cde":
        assert not each.admit(raw({"name": name}))
    rest.pass_over(3)
    assert each.done() == rest.done()
