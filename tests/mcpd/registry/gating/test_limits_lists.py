"""A server's lists are held to its limits as they are read: items past the list's
count or bytes are dropped, an item too big alone is dropped, a long description is
cut where a character ends with a marker, and one warning says it all per fetch."""

from __future__ import annotations

import logging
from pathlib import Path

import msgspec
import pytest
import trio
from msgspec import Raw

from mcpd.cli.status_view import render_status
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import ListLimits
from mcpd.registry.gating.limits import ListTrim, cut_text, limited_instructions, limited_saved
from protocol.mcp import core as mcp
from protocol.mcp import features
from tests.support.parts.status_rows import filled
from tests.support.parts.upstream import scripted_server, upstream


def limits(alias: str = "s", **keys: int) -> ListLimits:
    server = {"command": "x", **keys}
    return parse_config({"servers": {alias: server}}, env={}).list_limits(alias)


def raw(item: dict[str, object]) -> Raw:
    return Raw(msgspec.json.encode(item))


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# -- cutting a text --


def test_a_text_within_the_limit_is_left_alone() -> None:
    assert cut_text("a" * 100, 100) is None
    assert cut_text("\u20ac" * 33, 100) is None  # 99 bytes


def test_a_long_text_is_cut_at_the_limit_with_a_marker_saying_so() -> None:
    out = cut_text("a" * 300, 100)
    assert out == ("a" * 100 + " [mcpd: cut at 100 of 300 bytes]", 300)


@pytest.mark.parametrize(
    ("char", "kept"),
    [("\u20ac", 33), ("\U0001f600", 25), ("\u00e9", 50)],
    ids=["3-byte", "4-byte", "2-byte"],
)
def test_a_character_cut_in_two_is_left_out_whole(char: str, kept: int) -> None:
    out = cut_text("a" + char * 200, 101)
    assert out is not None
    text, size = out
    assert size == 1 + len(char.encode()) * 200
    body = text.split(" [mcpd: ", 1)[0]
    assert body == "a" + char * kept
    assert len(body.encode()) <= 101


# -- one list, read against the limits --


def test_items_past_the_count_are_dropped_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    trim = ListTrim("flood", "tools", "tools/list", limits(max_list_items=3))
    kept = [trim.admit(raw({"name": f"t{i}"})) for i in range(10)]
    assert kept == [True] * 3 + [False] * 7
    assert trim.full
    with caplog.at_level(logging.WARNING, "mcpd"):
        done = trim.done()
    assert done.dropped == ["7 tools past the first 3 dropped (servers.s.max_list_items)"]
    assert done.short and done.past == 7
    (line,) = warnings(caplog)
    assert line == "flood: tools/list: 7 tools past the first 3 dropped (servers.s.max_list_items)"


def test_a_full_list_whose_server_offers_more_pages_says_they_were_not_fetched() -> None:
    trim = ListTrim("flood", "prompts", "prompts/list", limits(max_list_items=2))
    assert trim.admit(raw({"name": "a"})) and trim.admit(raw({"name": "b"}))
    trim.stopped()
    (reason,) = trim.done().dropped
    assert reason == (
        "prompts past the first 2 were not fetched (servers.s.max_list_items): "
        "the server offered more pages"
    )


def test_items_past_the_lists_bytes_are_dropped() -> None:
    item = raw({"name": "x" * 90})  # 101 bytes
    trim = ListTrim("big", "resources", "resources/list", limits(max_list_bytes=250))
    assert [trim.admit(item) for _ in range(4)] == [True, True, False, False]
    trim.stopped()
    (reason,) = trim.done().dropped
    assert reason == (
        "2 resources dropped: the list reached its limit of 250 bytes "
        "(servers.s.max_list_bytes); later pages were not fetched"
    )


def test_an_item_too_big_alone_is_dropped_by_name_and_the_next_kept() -> None:
    trim = ListTrim("big", "tools", "tools/list", limits(max_item_bytes=100))
    huge = raw({"name": "huge", "inputSchema": {"x": "y" * 200}})
    assert not trim.admit(huge)
    assert trim.admit(raw({"name": "small"}))
    (reason,) = trim.done().dropped
    assert reason == f"huge: {len(huge)} bytes, over the limit of 100 (servers.s.max_item_bytes)"


def test_descriptions_are_cut_and_each_cut_is_listed_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    trim = ListTrim("wordy", "prompts", "prompts/list", limits(max_description_bytes=10))
    prompt = features.Prompt(
        name="p",
        description="d" * 25,
        arguments=[features.PromptArgument(name="q", description="q" * 11)],
    )
    short = features.Prompt(name="short", description="fine")
    for item in (prompt, short):
        trim.described(item)
    assert prompt.description == "d" * 10 + " [mcpd: cut at 10 of 25 bytes]"
    assert prompt.arguments and prompt.arguments[0].description == (
        "q" * 10 + " [mcpd: cut at 10 of 11 bytes]"
    )
    assert short.description == "fine"
    with caplog.at_level(logging.WARNING, "mcpd"):
        done = trim.done()
    assert done.cut == [
        "prompt p: description cut at 10 of 25 bytes (servers.s.max_description_bytes)",
        "prompt p argument q: description cut at 10 of 11 bytes (servers.s.max_description_bytes)",
    ]
    assert not done.short and done.dropped == []
    assert len(warnings(caplog)) == 1


def test_many_reasons_make_one_warning_naming_the_first_few(
    caplog: pytest.LogCaptureFixture,
) -> None:
    trim = ListTrim("bad", "tools", "tools/list", limits())
    for i in range(50):
        trim.drop(f"t{i}", "inputSchema is not a JSON object")
    with caplog.at_level(logging.WARNING, "mcpd"):
        done = trim.done()
    assert len(done.dropped) == 50
    (line,) = warnings(caplog)
    assert line.startswith("bad: tools/list: t0: inputSchema is not a JSON object; t1: ")
    assert line.endswith("; and 47 more (mcpd status lists them all)")


def test_a_list_within_its_limits_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    trim = ListTrim("calm", "tools", "tools/list", limits())
    assert all(trim.admit(raw({"name": f"t{i}"})) for i in range(100))
    with caplog.at_level(logging.WARNING, "mcpd"):
        done = trim.done()
    assert done == type(done)() and warnings(caplog) == []


def test_what_a_server_wrote_is_kept_short_in_a_reason() -> None:
    trim = ListTrim("s", "tools", "tools/list", limits(max_item_bytes=10))
    trim.admit(raw({"name": "n" * 5000}))
    trim.drop("t", "inputSchema has type " + "x" * 100_000)
    named, quoted = trim.done().dropped
    assert named.startswith("n" * 57 + "...: ") and len(named) < 150
    assert quoted.startswith("t: inputSchema has type xxx") and len(quoted) == 300


def test_instructions_are_cut_and_the_cut_named(caplog: pytest.LogCaptureFixture) -> None:
    lim = limits(max_instructions_bytes=1000)
    assert limited_instructions("s", "short", lim.instructions_bytes) == ("short", "")
    assert limited_instructions("s", None, lim.instructions_bytes) == (None, "")
    with caplog.at_level(logging.WARNING, "mcpd"):
        text, note = limited_instructions("s", "i" * 5000, lim.instructions_bytes)
    assert text == "i" * 1000 + " [mcpd: cut at 1,000 of 5,000 bytes]"
    assert note == "instructions cut at 1,000 of 5,000 bytes (servers.s.max_instructions_bytes)"
    assert warnings(caplog) == [f"s: {note}"]


def test_the_daemons_limits_apply_where_a_server_sets_none() -> None:
    config = parse_config(
        {
            "daemon": {"max_list_items": 50, "max_description_bytes": 500},
            "servers": {"a": {"command": "x", "max_list_items": 7}, "b": {"command": "y"}},
        },
        env={},
    )
    a, b = config.list_limits("a"), config.list_limits("b")
    assert a.items == (7, "servers.a.max_list_items")
    assert b.items == (50, "daemon.max_list_items")
    assert a.description_bytes == b.description_bytes == (500, "daemon.max_description_bytes")
    assert b.item_bytes == (256 * 1024, "daemon.max_item_bytes")
    assert b.list_bytes == (64 * 1024 * 1024, "daemon.max_list_bytes")
    assert b.instructions_bytes == (64 * 1024, "daemon.max_instructions_bytes")


def test_saved_items_are_held_to_the_limits_of_now() -> None:
    tools = [mcp.Tool(name=f"t{i}", description="x" * 40) for i in range(20)]
    kept = limited_saved("s", "tools", tools, limits(max_list_items=5, max_description_bytes=8))
    assert [t.name for t in kept] == ["t0", "t1", "t2", "t3", "t4"]
    assert kept[0].description == "x" * 8 + " [mcpd: cut at 8 of 40 bytes]"


def test_a_saved_tool_or_prompt_without_a_name_is_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A nameless item saved before it was left out at listing is not served again
    from the state file: no local name can be made of it."""
    with caplog.at_level(logging.WARNING, "mcpd"):
        tools = limited_saved("s", "tools", [mcp.Tool(name=""), mcp.Tool(name="t")], limits())
        prompts = limited_saved(
            "s", "prompts", [features.Prompt(name=""), features.Prompt(name="p")], limits()
        )
    assert [t.name for t in tools] == ["t"]
    assert [p.name for p in prompts] == ["p"]
    assert warnings(caplog) == [
        "s: saved tools: (unnamed): its name is empty",
        "s: saved prompts: (unnamed): its name is empty",
    ]


def test_a_resource_or_template_without_a_uri_is_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No agent could read it, and no mcpd:// name can be made of it."""
    with caplog.at_level(logging.WARNING, "mcpd"):
        resources = limited_saved(
            "s",
            "resources",
            [features.Resource(uri="", name="r"), features.Resource(uri="a://b", name="b")],
            limits(),
        )
        templates = limited_saved(
            "s",
            "resource_templates",
            [
                features.ResourceTemplate(uriTemplate="", name="t"),
                features.ResourceTemplate(uriTemplate="a://{x}", name="x"),
            ],
            limits(),
        )
    assert [r.uri for r in resources] == ["a://b"]
    assert [t.uriTemplate for t in templates] == ["a://{x}"]
    assert warnings(caplog) == [
        "s: saved resources: (no URI): its URI is empty",
        "s: saved resource templates: (no URI): its URI is empty",
    ]


# -- what `mcpd status` shows of it --


def test_status_text_shows_the_first_few_reasons_and_counts_the_rest() -> None:
    row = {
        "alias": "flood",
        "state": "ready",
        "dropped_tools": ["500 tools past the first 2,000 dropped (daemon.max_list_items)"],
        "dropped_prompts": [f"p{i}: malformed" for i in range(4)],
        "dropped_resource_templates": [],
        "cut": ["instructions cut at 65,536 of 300,000 bytes (daemon.max_instructions_bytes)"],
    }
    text = render_status(filled({"daemon": {}, "servers": [row]}))
    notes = [line.strip() for line in text.splitlines()[2:]][1:]
    assert notes == [
        "dropped tools| 500 tools past the first 2,000 dropped (daemon.max_list_items)",
        "dropped prompts| p0: malformed",
        "dropped prompts| p1: malformed",
        "dropped prompts| p2: malformed",
        "... and 2 more (mcpd status --json lists them)",
    ]
    row["dropped_prompts"] = []
    text = render_status(filled({"daemon": {}, "servers": [row]}))
    assert text.splitlines()[-1].strip() == (
        "cut| instructions cut at 65,536 of 300,000 bytes (daemon.max_instructions_bytes)"
    )
    # A name is the server's text: what it would do to a terminal is shown instead.
    row["cut"] = ["tool \x1b[2Jx\r: description cut at 10 of 20 bytes"]
    text = render_status(filled({"daemon": {}, "servers": [row]}))
    assert text.splitlines()[-1].strip() == (
        "cut| tool \\x1b[2Jx\\r: description cut at 10 of 20 bytes"
    )


# -- paging stops at the limit --


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "received.jsonl"


async def test_tools_list_asks_for_no_page_past_the_item_limit(
    log_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    flags = ["--tools", "25", "--page-size", "10"]
    with trio.fail_after(15), caplog.at_level(logging.WARNING, "mcpd"):
        async with scripted_server(log_path, *flags) as server:
            up = upstream(server, limits=limits("scripted", max_list_items=10))
            await up.connect()
            result = await up.list_tools()
            assert [t.name for t in result.tools] == [f"tool{i}" for i in range(10)]
            assert len(server.requests("tools/list")) == 1
            assert result.short and result.dropped == [
                "tools past the first 10 were not fetched (servers.scripted.max_list_items): "
                "the server offered more pages"
            ]
            # Read again, unchanged: the same, not decoded (nor said) again.
            again = await up.list_tools()
            assert again.unchanged and again.dropped == result.dropped and again.short
            assert len(server.requests("tools/list")) == 2
    (said,) = [w for w in warnings(caplog) if "tools/list" in w]
    assert "past the first 10 were not fetched" in said


async def test_a_limit_within_a_page_drops_the_rest_of_it(log_path: Path) -> None:
    flags = ["--tools", "25", "--page-size", "10"]
    with trio.fail_after(15):
        async with scripted_server(log_path, *flags) as server:
            up = upstream(server, limits=limits("scripted", max_list_items=15))
            await up.connect()
            result = await up.list_tools()
            assert len(result.tools) == 15
            assert len(server.requests("tools/list")) == 2
            assert result.dropped == [
                "5 tools past the first 15 dropped (servers.scripted.max_list_items); "
                "later pages were not fetched"
            ]
