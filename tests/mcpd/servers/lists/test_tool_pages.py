"""A paged tools/list fed page by page, without a server: where the next page is, when
the list is over or broken, and what agents may be shown of it."""

from __future__ import annotations

import json

import pytest
from msgspec import Raw

from mcpd.registry.gating.limits import DEFAULT_LIMITS
from mcpd.servers.connected.handshake import ProtocolViolation
from mcpd.servers.lists.tool_pages import ToolPages
from mcpd.servers.results.taking_apart import MOST_PARTS

SCHEMA = {"type": "object"}


def page(*names: str, cursor: str | None = None, **extra: object) -> Raw:
    tools = [{"name": n, "description": f"does {n}", "inputSchema": SCHEMA} for n in names]
    body: dict[str, object] = {"tools": tools, **extra}
    if cursor is not None:
        body["nextCursor"] = cursor
    return Raw(json.dumps(body).encode())


def read(*pages: Raw, max_pages: int = 10) -> ToolPages:
    reading = ToolPages("notes", DEFAULT_LIMITS, max_pages)
    for i, raw in enumerate(pages):
        more = reading.feed(raw)
        assert more == (i < len(pages) - 1)
    return reading


def test_each_page_names_where_the_next_is_and_the_tools_come_in_order() -> None:
    reading = ToolPages("notes", DEFAULT_LIMITS, 10)
    assert reading.cursor is None
    assert reading.feed(page("a", "b", cursor="p2")) is True
    assert reading.cursor == "p2"
    assert reading.feed(page("c")) is False
    result, _ = reading.result(None, None)
    assert [t.name for t in result.tools] == ["a", "b", "c"]
    assert result.unchanged is False


def test_the_first_page_says_how_long_the_list_holds_and_for_whom() -> None:
    reading = read(page("a", cursor="2", ttlMs=30_000, cacheScope="private"), page("b", ttlMs=1))
    result, _ = reading.result(None, None)
    assert (result.ttl_ms, result.cache_scope) == (30_000, "private")
    reading = read(page("a", ttlMs=-5))
    assert reading.result(None, None)[0].ttl_ms == 0


@pytest.mark.parametrize(("written", "ttl"), [(b"1e20", 10**20), (b"1.5", 0), (b'"soon"', 0)])
def test_a_ttl_that_is_no_integer_as_json_has_it_is_read_not_a_broken_list(
    written: bytes, ttl: int
) -> None:
    raw = Raw(b'{"tools":[{"name":"a","inputSchema":{}}],"ttlMs":' + written + b"}")
    reading = read(raw)
    result, _ = reading.result(None, None)
    assert [t.name for t in result.tools] == ["a"] and result.ttl_ms == ttl
    assert (reading.ttl_wrong is None) == (ttl != 0)


def test_a_cursor_given_twice_is_a_broken_list() -> None:
    reading = ToolPages("notes", DEFAULT_LIMITS, 10)
    assert reading.feed(page("a", cursor="x")) and reading.feed(page("b", cursor="y"))
    with pytest.raises(ProtocolViolation, match='cursor "x" repeated'):
        reading.feed(page("c", cursor="x"))


def test_a_list_still_going_at_the_page_cap_is_broken_one_ending_there_is_whole() -> None:
    reading = ToolPages("notes", DEFAULT_LIMITS, 2)
    assert reading.feed(page("a", cursor="1"))
    with pytest.raises(ProtocolViolation, match="did not end after 2 pages"):
        reading.feed(page("b", cursor="2"))
    whole = read(page("a", cursor="1"), page("b"), max_pages=2)
    assert [t.name for t in whole.result(None, None)[0].tools] == ["a", "b"]


def test_a_page_that_is_no_list_is_broken() -> None:
    with pytest.raises(ProtocolViolation, match="bad tools/list result"):
        ToolPages("notes", DEFAULT_LIMITS, 10).feed(Raw(b'{"tools": 3}'))


def test_a_second_tool_of_one_name_is_left_out_with_why() -> None:
    result, _ = read(page("a", "b", "a")).result(None, None)
    assert [t.name for t in result.tools] == ["a", "b"]
    assert len(result.dropped) == 1 and "a" in result.dropped[0]


def test_the_same_bytes_again_are_the_last_tools_not_decoded_again() -> None:
    first, listed = read(page("a", cursor="1"), page("b")).result(None, None)
    again, kept = read(page("a", cursor="1"), page("b")).result(listed, None)
    assert again.unchanged and again.tools is first.tools and kept is listed
    # How the items are paged is not what they are.
    split, _ = read(page("a", "b")).result(listed, None)
    assert split.unchanged
    other, _ = read(page("a", cursor="1"), page("c")).result(listed, None)
    assert not other.unchanged and [t.name for t in other.tools] == ["a", "c"]


def test_who_the_server_is_may_come_in_a_pages_meta() -> None:
    info = {"name": "notes-server", "version": "2"}
    meta = {"io.modelcontextprotocol/serverInfo": info}
    reading = read(page("a", cursor="1"), page("b", _meta=meta))
    assert reading.server_info is not None and reading.server_info.name == "notes-server"
    assert read(page("a")).server_info is None


def test_a_page_of_too_many_values_to_read_is_a_broken_list_naming_its_size() -> None:
    empties = b",".join([b"{}"] * (MOST_PARTS + 1))
    raw = Raw(b'{"tools":[{"name":"a","inputSchema":{"x":[' + empties + b"]}}]}")
    with pytest.raises(ProtocolViolation, match=f"notes: a tools/list page of {len(raw):,} bytes"):
        read(raw)


def test_a_page_past_the_lists_limit_is_counted_to_its_end() -> None:
    reading = ToolPages("notes", DEFAULT_LIMITS, 10)
    over = DEFAULT_LIMITS.items.value + 5
    assert not reading.feed(page(*(f"t{i}" for i in range(over))))
    result, _ = reading.result(None, None)
    assert len(result.tools) == DEFAULT_LIMITS.items.value
    assert result.short and "5 tools" in result.dropped[-1]


def test_over_http_the_headers_noted_are_those_of_the_tools_kept_now() -> None:
    def annotated(name: str, header: str) -> dict[str, object]:
        region = {"type": "string", "x-mcp-header": header}
        return {"name": name, "inputSchema": {"type": "object", "properties": {"r": region}}}

    twice = [annotated("a", "Region"), annotated("a", "Other"), annotated("b", "Zone")]
    paths: dict[str, dict[str, tuple[str, ...]]] = {"gone": {"Mcp-Param-X": ("x",)}}
    read(Raw(json.dumps({"tools": twice}).encode())).result(None, paths)
    assert paths == {"a": {"Mcp-Param-Region": ("r",)}, "b": {"Mcp-Param-Zone": ("r",)}}
