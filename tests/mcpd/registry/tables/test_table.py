"""The tool table agents see: local names, reverse lookup, descriptions, trust, outages."""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import subprocess
import sys
import textwrap
from typing import Any

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mcpd.config.tables.model import NamingConfig
from mcpd.registry.tables.table import ToolTable
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from tests.support.parts.hash_twins import agreeing_names

SAFE = re.compile(r"^[A-Za-z0-9_-]+$")
DEFAULT = NamingConfig()


def tool(name: str, **fields: Any) -> mcp.Tool:
    """A tool as it arrives from a server: decoded from the server's bytes."""
    return msgspec.json.decode(json.dumps({"name": name, **fields}).encode(), type=mcp.Tool)


def tools(*names: str) -> list[mcp.Tool]:
    return [tool(n, description=f"does {n}") for n in names]


def short_hash(alias: str, name: str, digits: int = 6) -> str:
    return hashlib.sha1(f"{alias}::{name}".encode()).hexdigest()[:digits]


def listed(registry: ToolTable) -> list[dict[str, Any]]:
    """The tools/list entries exactly as an agent decodes them."""
    return [json.loads(rpc.encode(item)) for item in registry.listing()]


def by_original(registry: ToolTable, alias: str) -> dict[str, dict[str, Any]]:
    return {
        t["_meta"]["mcpd/originalName"]: t
        for t in listed(registry)
        if t["_meta"]["mcpd/server"] == alias
    }


def local_names(registry: ToolTable) -> list[str]:
    return [e.local for e in registry.entries()]


# -- local names --


def test_default_template_gives_plain_names() -> None:
    reg = ToolTable(DEFAULT)
    reg.update("notes", tools("search", "read-note"))
    assert sorted(local_names(reg)) == ["mcp__notes__read-note", "mcp__notes__search"]


@pytest.mark.parametrize(
    ("name", "local"),
    [
        ("notes.search", "mcp__s__notes_search"),
        ("a b/c:d", "mcp__s__a_b_c_d"),
        ("caf\u00e9", "mcp__s__caf_"),
        ("\u65e5\u672c", "mcp__s____"),
        ("tab\there\nnl", "mcp__s__tab_here_nl"),
        ("ok_-Name9", "mcp__s__ok_-Name9"),
    ],
)
def test_characters_outside_the_safe_set_become_underscores(name: str, local: str) -> None:
    reg = ToolTable(DEFAULT)
    reg.update("s", tools(name))
    (entry,) = reg.entries()
    assert entry.local == local


def test_a_custom_template_is_used_and_sanitized() -> None:
    reg = ToolTable(NamingConfig(template="ext.{alias}:{tool}", max_length=64))
    reg.update("notes", tools("search"))
    assert local_names(reg) == ["ext_notes_search"]


def test_a_name_over_max_length_is_cut_and_ends_in_a_hash() -> None:
    name = "very_long_tool_name_" * 4
    reg = ToolTable(DEFAULT)
    reg.update("notes", tools(name))
    (entry,) = reg.entries()
    candidate = f"mcp__notes__{name}"
    assert entry.local == candidate[:57] + "_" + short_hash("notes", name)
    assert len(entry.local) == 64


def test_a_name_exactly_at_max_length_is_kept() -> None:
    name = "x" * (64 - len("mcp__notes__"))
    reg = ToolTable(DEFAULT)
    reg.update("notes", tools(name))
    assert local_names(reg) == [f"mcp__notes__{name}"]


def test_a_shorter_max_length_cuts_sooner() -> None:
    reg = ToolTable(NamingConfig(max_length=20))
    reg.update("notes", tools("search_everything"))
    (entry,) = reg.entries()
    assert entry.local == "mcp__notes__" + "s" + "_" + short_hash("notes", "search_everything")
    assert len(entry.local) == 20


def test_tools_whose_names_still_collide_both_get_the_hash_form() -> None:
    reg = ToolTable(DEFAULT)
    reg.update("s", tools("a.b", "a_b", "c"))
    names = {e.original: e.local for e in reg.entries()}
    assert names == {
        "a.b": "mcp__s__a_b_" + short_hash("s", "a.b"),
        "a_b": "mcp__s__a_b_" + short_hash("s", "a_b"),
        "c": "mcp__s__c",
    }


def test_tools_of_two_servers_that_collide_both_get_the_hash_form() -> None:
    reg = ToolTable(DEFAULT)
    reg.update("a", tools("b__c"))
    reg.update("a__b", tools("c"))
    names = {(e.alias, e.original): e.local for e in reg.entries()}
    assert names == {
        ("a", "b__c"): "mcp__a__b__c_" + short_hash("a", "b__c"),
        ("a__b", "c"): "mcp__a__b__c_" + short_hash("a__b", "c"),
    }


def test_a_plain_name_never_takes_another_tools_cut_name() -> None:
    # alias x has a tool whose name is cut; alias x__a has a tool whose plain name
    # is exactly that cut name. They must still be two names, each reaching its tool,
    # and the cut name stays x's: anyone can compute it.
    long = "a__" + "t" * 60
    reg = ToolTable(DEFAULT)
    reg.update("x", tools(long))
    (first,) = reg.entries()
    lookalike = first.local[len("mcp__x__a__") :]
    reg.update("x__a", tools(lookalike))
    entries = reg.entries()
    assert len({e.local for e in entries}) == 2
    for entry in entries:
        found = reg.lookup(entry.local)
        assert found is not None
        assert (found.alias, found.original) == (entry.alias, entry.original)
    assert reg.lookup(first.local) is not None
    assert reg.lookup(first.local).alias == "x"  # type: ignore[union-attr]
    # The same tools in one update, and in a new registry, agree.
    again = ToolTable(DEFAULT)
    again.update("x__a", tools(lookalike))
    again.update("x", tools(long))
    assert local_names(again) == local_names(reg)


BARE = NamingConfig(template="{tool}")
ECHO_HASHED = "echo_" + short_hash("echo", "echo")


def who(registry: ToolTable, local: str) -> tuple[str, str] | None:
    found = registry.lookup(local)
    return None if found is None else (found.alias, found.original)


@pytest.mark.parametrize("first", ["echo", "evil"])
def test_a_server_cannot_take_another_tools_hashed_name_by_listing_it(first: str) -> None:
    # evil lists echo's tool name, so echo's becomes echo_<hash of echo::echo>; then it
    # lists that name too. Whichever server lists first, the hashed name reaches echo.
    lists = {"echo": tools("echo"), "evil": tools("echo", ECHO_HASHED)}
    reg = ToolTable(BARE)
    for alias in sorted(lists, key=lambda a: a != first):
        reg.update(alias, lists[alias])
    assert who(reg, ECHO_HASHED) == ("echo", "echo")
    evil = {e.original: e.local for e in reg.entries() if e.alias == "evil"}
    assert evil == {
        "echo": "echo_" + short_hash("evil", "echo"),
        ECHO_HASHED: ECHO_HASHED + "_" + short_hash("evil", ECHO_HASHED),
    }


def test_a_hashed_name_stays_its_tools_while_a_newcomer_aims_at_it() -> None:
    reg = ToolTable(BARE)
    reg.update("echo", tools("echo"))
    reg.update("evil", tools("echo"))
    assert who(reg, ECHO_HASHED) == ("echo", "echo")
    # Every longer hash of echo::echo as well: echo's name does not move.
    longer = [f"echo_{short_hash('echo', 'echo', d)}" for d in range(6, 41, 2)]
    reg.update("evil", tools("echo", *longer))
    assert who(reg, ECHO_HASHED) == ("echo", "echo")
    assert len(set(local_names(reg))) == len(local_names(reg))
    # With echo's name plain again, the lookalike is still hashed: no name it lists
    # is ever given as it is while it reads like a hashed one.
    reg.update("evil", tools(ECHO_HASHED))
    assert who(reg, "echo") == ("echo", "echo")
    assert who(reg, ECHO_HASHED) is None
    reg.update("evil", tools(ECHO_HASHED, "echo"))
    assert who(reg, ECHO_HASHED) == ("echo", "echo")
    reg.remove("evil")
    assert local_names(reg) == ["echo"]


OWN = ("mcpd_search_tools", "mcpd_describe_tools", "mcpd_call_tool")


@pytest.mark.parametrize("first", ["ev", "gh"])
def test_a_tool_the_template_would_give_a_name_of_mcpds_own_is_hashed(
    first: str, caplog: pytest.LogCaptureFixture
) -> None:
    """mcpd's meta-tools answer to their names: a server's tool the template would
    name so gets a hashed name (``mcpd.call.tool`` reads as ``mcpd_call_tool`` too),
    and a call by that name reaches it."""
    lists = {"ev": tools(*OWN, "merge_pr"), "gh": tools("mcpd.call.tool")}
    reg = ToolTable(BARE)
    with caplog.at_level(logging.WARNING, "mcpd.registry"):
        for alias in sorted(lists, key=lambda a: a != first):
            reg.update(alias, lists[alias])
    names = {(e.alias, e.original): e.local for e in reg.entries()}
    assert names == {
        ("ev", "merge_pr"): "merge_pr",
        **{("ev", n): f"{n}_{short_hash('ev', n)}" for n in OWN},
        ("gh", "mcpd.call.tool"): "mcpd_call_tool_" + short_hash("gh", "mcpd.call.tool"),
    }
    assert all(reg.lookup(n) is None for n in OWN)
    assert who(reg, names[("ev", "mcpd_call_tool")]) == ("ev", "mcpd_call_tool")
    said = [r.getMessage() for r in caplog.records if "mcpd's own tool" in r.getMessage()]
    assert {m.split()[0] for m in said} == set(OWN), said
    last = [m for m in said if m.startswith("mcpd_call_tool ")][-1]
    assert "ev's 'mcpd_call_tool' as mcpd_call_tool_" in last, last
    assert "gh's 'mcpd.call.tool' as mcpd_call_tool_" in last, last
    reg.rename(BARE)
    assert {(e.alias, e.original): e.local for e in reg.entries()} == names


@pytest.mark.parametrize(
    "name", ["run_x_55c944", "sync_0123456789abcdef", "x_" + "f" * 40, "_abcdef"]
)
def test_a_name_shaped_like_a_hashed_one_is_hashed_even_alone(name: str) -> None:
    reg = ToolTable(DEFAULT)
    reg.update("s", tools(name))
    assert local_names(reg) == [f"mcp__s__{name}_{short_hash('s', name)}"]


@pytest.mark.parametrize("name", ["run_x_55C944", "run_x_55c94", "run_x_55c94g", "sync-abcdef"])
def test_a_name_not_shaped_like_a_hashed_one_is_kept(name: str) -> None:
    reg = ToolTable(DEFAULT)
    reg.update("s", tools(name))
    assert local_names(reg) == [f"mcp__s__{name}"]


@pytest.mark.parametrize("first", ["a", "a__b"])
def test_a_server_cannot_take_a_hashed_name_by_a_hash_that_lands_on_it(first: str) -> None:
    # Server a's two names read alike, so both are hashed; one hash lands on
    # mcp__a__b__run_x_<digits>, the name a__b's tool run_x_<digits> asks the template
    # for. That name is shaped like a hashed one, so a__b's tool never has it: its own
    # hashed name is the same with a or without it, whoever lists first.
    digits = short_hash("a", "b__run.x")
    honest = ("a__b", f"run_x_{digits}")
    alone = ToolTable(DEFAULT)
    alone.update(*honest[:1], tools(honest[1]))
    (name,) = local_names(alone)
    assert name == f"mcp__a__b__run_x_{digits}_{short_hash(*honest)}"
    lists = {"a": tools("b__run.x", "b__run:x"), "a__b": tools(honest[1])}
    reg = ToolTable(DEFAULT)
    for alias in sorted(lists, key=lambda a: a != first):
        reg.update(alias, lists[alias])
    assert who(reg, name) == honest
    assert who(reg, f"mcp__a__b__run_x_{digits}") == ("a", "b__run.x")


def long_tool(alias: str, i: int) -> str:
    return ("b__" if alias == "a" else "") + "x" * 60 + str(i)


@pytest.mark.parametrize("first", ["a", "a__b"])
def test_hashed_names_that_agree_are_all_lengthened_whoever_came_first(first: str) -> None:
    # Server a found a name whose cut name and six digits agree with a__b's tool's.
    evil, honest = agreeing_names("a", "a__b", long_tool)
    alone = ToolTable(DEFAULT)
    alone.update("a__b", tools(honest))
    (six,) = local_names(alone)
    lists = {"a": tools(evil), "a__b": tools(honest)}
    reg = ToolTable(DEFAULT)
    for alias in sorted(lists, key=lambda a: a != first):
        reg.update(alias, lists[alias])
    # Neither has the name both wanted; each has a longer one of its own.
    assert who(reg, six) is None
    cut = six[: 64 - 9]
    assert who(reg, f"{cut}_{short_hash('a__b', honest, 8)}") == ("a__b", honest)
    assert who(reg, f"{cut}_{short_hash('a', evil, 8)}") == ("a", evil)
    # Without the attacker the honest tool has its six digits back.
    reg.remove("a")
    assert local_names(reg) == [six]
    assert who(reg, six) == ("a__b", honest)


def test_same_config_and_tools_give_the_same_names_in_a_new_registry() -> None:
    names = ["search", "a.b", "a_b", "x" * 80, "y" * 80, "caf\u00e9", "caf_"]
    first = ToolTable(DEFAULT)
    first.update("notes", tools(*names))
    first.update("tickets", tools("search", "open"))
    shuffled = names[:]
    random.Random(7).shuffle(shuffled)
    second = ToolTable(DEFAULT)
    second.update("tickets", tools("open", "search"))
    second.update("notes", tools(*shuffled))
    assert listed(first) == listed(second)


def _hash_prefix_twins(alias: str) -> tuple[str, str]:
    """Two long names whose cut names share the candidate and the 6 hash digits."""
    seen: dict[str, str] = {}
    for i in range(1_000_000):
        name = "t" * 60 + str(i)
        digest = short_hash(alias, name)
        if digest in seen:
            return seen[digest], name
        seen[digest] = name
    raise AssertionError("no twins found")


RESTART_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from mcpd.config.tables.model import NamingConfig
    from mcpd.registry.tables.table import ToolTable
    from protocol.mcp import core as mcp
    reg = ToolTable(NamingConfig())
    reg.update("x", [mcp.Tool(name=n) for n in json.loads(sys.argv[1])])
    print(json.dumps({e.original: e.local for e in reg.entries()}))
    """
)


def test_names_survive_a_restart_even_when_cut_names_share_their_hash_digits() -> None:
    twins = _hash_prefix_twins("x")
    outputs = set()
    for seed in range(6):
        proc = subprocess.run(
            [sys.executable, "-c", RESTART_SCRIPT, json.dumps(list(twins))],
            capture_output=True,
            text=True,
            env={"PYTHONHASHSEED": str(seed), "PYTHONPATH": ":".join(sys.path)},
            timeout=60,
            check=True,
        )
        outputs.add(proc.stdout)
    assert len(outputs) == 1
    names = json.loads(outputs.pop())
    assert len(set(names.values())) == 2


# -- reverse lookup --


def test_lookup_goes_through_the_table_only() -> None:
    reg = ToolTable(DEFAULT)
    reg.update("notes", tools("notes.search", "read"))
    entry = reg.lookup("mcp__notes__notes_search")
    assert entry is not None
    assert (entry.alias, entry.original) == ("notes", "notes.search")
    assert reg.lookup("mcp__notes__notes.search") is None
    assert reg.lookup("notes.search") is None
    assert reg.lookup("read") is None
    assert reg.lookup("mcp__other__read") is None


# -- what agents see --


def test_description_starts_with_the_source_alias() -> None:
    reg = ToolTable(DEFAULT)
    reg.update("notes", [tool("search", description="Find notes."), tool("bare")])
    seen = by_original(reg, "notes")
    assert seen["search"]["description"] == "[notes] Find notes."
    assert seen["bare"]["description"].startswith("[notes]")


def test_every_tool_carries_its_server_and_original_name_in_meta() -> None:
    reg = ToolTable(DEFAULT)
    reg.update("notes", [tool("a.b", _meta={"vendor/x": 1})])
    (seen,) = listed(reg)
    assert seen["name"] == "mcp__notes__a_b"
    assert seen["_meta"]["mcpd/server"] == "notes"
    assert seen["_meta"]["mcpd/originalName"] == "a.b"
    assert seen["_meta"]["mcpd/available"] is True
    assert seen["_meta"]["vendor/x"] == 1


def test_an_untrusted_servers_annotations_are_not_believed() -> None:
    own = {
        "title": "Search",
        "readOnlyHint": True,
        "destructiveHint": False,
        "openWorldHint": False,
    }
    reg = ToolTable(DEFAULT)
    reg.update("notes", [tool("search", annotations=own), tool("plain")])
    seen = by_original(reg, "notes")
    annotations = seen["search"]["annotations"]
    assert annotations["readOnlyHint"] is False
    assert annotations["destructiveHint"] is True
    assert annotations["openWorldHint"] is True
    assert annotations["idempotentHint"] is False
    assert annotations["title"] == "[notes] Search"  # marked with its server, as the title
    assert seen["search"]["_meta"]["mcpd/upstreamAnnotations"] == {**own, "title": "[notes] Search"}
    # No annotations at all still means "may write, may destroy, may not be retried".
    assert seen["plain"]["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": True,
    }
    assert "mcpd/upstreamAnnotations" not in seen["plain"]["_meta"]


def test_a_server_cannot_plant_mcpd_meta_keys() -> None:
    planted = tool("sneaky")
    planted.meta = {
        "mcpd/upstreamAnnotations": {"readOnlyHint": True},
        "mcpd/server": "root",
        "vendor/x": 1,
    }
    reg = ToolTable(DEFAULT)
    reg.update("notes", [planted])
    meta = by_original(reg, "notes")["sneaky"]["_meta"]
    assert "mcpd/upstreamAnnotations" not in meta
    assert meta["mcpd/server"] == "notes" and meta["vendor/x"] == 1


def test_a_trusted_servers_annotations_are_kept() -> None:
    own = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True}
    reg = ToolTable(DEFAULT)
    reg.update("notes", [tool("search", annotations=own), tool("plain")], trusted=True)
    seen = by_original(reg, "notes")
    assert seen["search"]["annotations"] == own
    assert "mcpd/upstreamAnnotations" not in seen["search"]["_meta"]
    assert "annotations" not in seen["plain"]


def test_changing_trust_alone_changes_what_agents_see() -> None:
    own = {"readOnlyHint": True}
    reg = ToolTable(DEFAULT)
    assert reg.update("notes", [tool("search", annotations=own)])
    assert by_original(reg, "notes")["search"]["annotations"]["readOnlyHint"] is False
    assert reg.update("notes", [tool("search", annotations=own)], trusted=True)
    assert by_original(reg, "notes")["search"]["annotations"] == own


def test_schemas_are_passed_on_as_the_values_the_server_sent() -> None:
    schema = (
        b'{ "type" : "object",\n  "properties": {"q": {"type":"string",'
        b' "description":"caf\\u00e9 \\"q\\""}}, "required" : ["q"] ,"x-order":[3,1.50,2]}'
    )
    output = b'{"type":"array","items":{"type":"integer"}}'
    data = b'{"name":"search","inputSchema":' + schema + b',"outputSchema":' + output + b"}"
    reg = ToolTable(DEFAULT)
    reg.update("notes", [msgspec.json.decode(data, type=mcp.Tool)])
    (encoded,) = (rpc.encode(item) for item in reg.listing())
    assert b'"outputSchema":' + output in bytes(encoded)
    again = msgspec.json.decode(bytes(encoded), type=mcp.Tool)
    assert msgspec.json.decode(again.inputSchema) == msgspec.json.decode(schema)


def test_title_and_icons_are_passed_on() -> None:
    icons = [{"src": "https://example.com/i.png", "mimeType": "image/png"}]
    reg = ToolTable(DEFAULT)
    reg.update("notes", [tool("search", title="Search notes", icons=icons)])
    (seen,) = listed(reg)
    assert seen["title"] == "[notes] Search notes"  # a title says its server, as descriptions do
    assert seen["icons"] == icons


def test_order_is_alias_then_original_name() -> None:
    reg = ToolTable(DEFAULT)
    reg.update("zeta", tools("b", "a"))
    reg.update("alpha", tools("z_last", "a.first", "M"))
    order = [(t["_meta"]["mcpd/server"], t["_meta"]["mcpd/originalName"]) for t in listed(reg)]
    assert order == [
        ("alpha", "M"),
        ("alpha", "a.first"),
        ("alpha", "z_last"),
        ("zeta", "a"),
        ("zeta", "b"),
    ]
    assert [e.original for e in reg.entries()] == ["M", "a.first", "z_last", "a", "b"]


# -- availability --


def test_an_unavailable_server_keeps_its_tools_listed_with_a_marker() -> None:
    reg = ToolTable(DEFAULT)
    reg.update("notes", [tool("search", description="Find notes.")])
    reg.update("tickets", tools("open"))
    marker = "UNAVAILABLE: notes is down (process exited); retrying at 12:00:05"
    assert reg.set_availability("notes", False, marker)
    seen = by_original(reg, "notes")["search"]
    assert seen["description"].startswith(f"[{marker}]")
    assert seen["description"].endswith("[notes] Find notes.")
    assert seen["_meta"]["mcpd/available"] is False
    entry = reg.lookup("mcp__notes__search")
    assert entry is not None
    assert entry.available is False
    other = by_original(reg, "tickets")["open"]
    assert other["_meta"]["mcpd/available"] is True
    assert other["description"].startswith("[tickets]")


def test_availability_comes_back_and_unchanged_state_is_no_change() -> None:
    reg = ToolTable(DEFAULT)
    reg.update("notes", tools("search"))
    before = listed(reg)
    version = reg.version
    assert reg.set_availability("notes", False, "down") is True
    assert reg.version > version
    assert reg.set_availability("notes", False, "down") is False
    assert reg.set_availability("notes", True) is True
    assert listed(reg) == before
    assert reg.set_availability("notes", True) is False
    assert reg.set_availability("absent", False, "down") is False


def test_an_outage_survives_a_tool_update() -> None:
    reg = ToolTable(DEFAULT)
    reg.update("notes", tools("search"))
    reg.set_availability("notes", False, "down")
    reg.update("notes", tools("search", "read"))
    for seen in by_original(reg, "notes").values():
        assert seen["_meta"]["mcpd/available"] is False
        assert seen["description"].startswith("[down]")


# -- changes --


def test_update_reports_whether_anything_changed() -> None:
    reg = ToolTable(DEFAULT)
    assert reg.update("notes", tools("a", "b")) is True
    assert reg.update("notes", tools("b", "a")) is False
    assert reg.update("notes", [tool("a", description="changed"), *tools("b")]) is True
    assert reg.count("notes") == 2
    assert sorted(e.original for e in reg.entries() if e.alias == "notes") == ["a", "b"]


def test_removing_a_server_frees_a_colliding_name() -> None:
    reg = ToolTable(DEFAULT)
    reg.update("a", tools("b__c"))
    reg.update("a__b", tools("c"))
    hashed = {e.alias: e.local for e in reg.entries()}
    assert reg.remove("a__b") is True
    assert local_names(reg) == ["mcp__a__b__c"]
    entry = reg.lookup("mcp__a__b__c")
    assert entry is not None
    assert (entry.alias, entry.original) == ("a", "b__c")
    assert reg.lookup(hashed["a"]) is None
    assert reg.lookup(hashed["a__b"]) is None
    assert reg.remove("a__b") is False
    assert list(reg.aliases()) == ["a"]


def test_dropping_a_colliding_tool_gives_the_other_its_plain_name_back() -> None:
    reg = ToolTable(DEFAULT)
    reg.update("s", tools("a.b", "a_b"))
    reg.update("s", tools("a_b"))
    assert local_names(reg) == ["mcp__s__a_b"]
    assert reg.lookup("mcp__s__a_b_" + short_hash("s", "a_b")) is None


def test_a_removed_servers_tools_are_gone() -> None:
    reg = ToolTable(DEFAULT)
    reg.update("notes", tools("search"))
    reg.update("tickets", tools("open"))
    reg.remove("notes")
    assert reg.lookup("mcp__notes__search") is None
    assert [t["name"] for t in listed(reg)] == ["mcp__tickets__open"]


def test_rename_derives_every_name_again() -> None:
    reg = ToolTable(DEFAULT)
    reg.update("notes", tools("search", "x" * 70))
    reg.set_availability("notes", False, "down")
    reg.rename(NamingConfig(template="{alias}_{tool}", max_length=32))
    names = {e.original: e.local for e in reg.entries()}
    assert names["search"] == "notes_search"
    assert names["x" * 70] == "notes_" + "x" * 19 + "_" + short_hash("notes", "x" * 70)
    assert reg.lookup("mcp__notes__search") is None
    entry = reg.lookup("notes_search")
    assert entry is not None
    assert entry.original == "search"
    assert all(t["_meta"]["mcpd/available"] is False for t in listed(reg))


# -- properties of the name mapping --

ALIAS_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
aliases = st.text(alphabet=ALIAS_CHARS, min_size=1, max_size=24)
tool_names = st.one_of(
    st.text(min_size=1, max_size=140),
    st.text(alphabet="ab._- /", min_size=1, max_size=6),
    st.builds(lambda n, tail: "t" * n + tail, st.integers(40, 90), st.text(max_size=3)),
    # Shaped like a hashed name, or nearly.
    st.builds(
        lambda stem, hex_: f"{stem}_{hex_}",
        st.text(alphabet="ab._", max_size=3),
        st.text(alphabet="0123456789abcdef", min_size=5, max_size=8),
    ),
)
servers = st.dictionaries(aliases, st.lists(tool_names, unique=True, max_size=8), max_size=5)
namings = st.builds(
    NamingConfig,
    template=st.sampled_from(
        ["mcp__{alias}__{tool}", "{tool}", "{alias}.{tool}", "mcp__mcpd__mcp__{alias}__{tool}"]
    ),
    max_length=st.integers(16, 80),
)


def check_mapping(reg: ToolTable, expected: dict[str, list[str]], naming: NamingConfig) -> None:
    entries = reg.entries()
    assert sorted((e.alias, e.original) for e in entries) == sorted(
        (alias, name) for alias, names in expected.items() for name in names
    )
    locals_ = [e.local for e in entries]
    assert len(set(locals_)) == len(locals_)
    for entry in entries:
        assert len(entry.local) <= naming.max_length
        assert SAFE.match(entry.local), entry.local
        found = reg.lookup(entry.local)
        assert found is not None
        assert (found.alias, found.original) == (entry.alias, entry.original)
    assert [json.loads(rpc.encode(item))["name"] for item in reg.listing()] == locals_


@settings(max_examples=300, deadline=None)
@given(servers=servers, naming=namings, order=st.randoms(use_true_random=False))
@example(servers={"s": ["a.b", "a_b", "a-b"]}, naming=DEFAULT, order=random.Random(0))
@example(servers={"a": ["b__c"], "a__b": ["c"]}, naming=DEFAULT, order=random.Random(0))
def test_property_names_are_unique_safe_short_and_reversible(
    servers: dict[str, list[str]], naming: NamingConfig, order: random.Random
) -> None:
    reg = ToolTable(naming)
    aliases_in_order = list(servers)
    order.shuffle(aliases_in_order)
    for alias in aliases_in_order:
        reg.update(alias, [mcp.Tool(name=n) for n in servers[alias]])
    check_mapping(reg, servers, naming)
    # A restart brings the servers up in another order: the same names come out.
    fresh = ToolTable(naming)
    for alias in sorted(servers):
        fresh.update(alias, [mcp.Tool(name=n) for n in reversed(servers[alias])])
    assert local_names(fresh) == local_names(reg)


@settings(max_examples=200, deadline=None)
@given(
    first=servers,
    second=servers,
    naming=namings,
    removed=st.sets(aliases, max_size=3),
    renamed=st.one_of(st.none(), namings),
)
def test_property_the_mapping_holds_through_updates_removals_and_renames(
    first: dict[str, list[str]],
    second: dict[str, list[str]],
    naming: NamingConfig,
    removed: set[str],
    renamed: NamingConfig | None,
) -> None:
    reg = ToolTable(naming)
    for alias, names in first.items():
        reg.update(alias, [mcp.Tool(name=n) for n in names])
    for alias, names in second.items():
        reg.update(alias, [mcp.Tool(name=n) for n in names])
    current = {**first, **second}
    for alias in removed:
        reg.remove(alias)
        current.pop(alias, None)
    if renamed is not None:
        reg.rename(renamed)
        naming = renamed
    check_mapping(reg, current, naming)
    # The names depend on the tools alone, not on the way the table came to hold them.
    fresh = ToolTable(naming)
    for alias in sorted(current, reverse=True):
        fresh.update(alias, [mcp.Tool(name=n) for n in current[alias]])
    assert local_names(fresh) == local_names(reg)
