"""A profile's view on its own: a server's patterns taken as globs over aliases, names
of its own that no server can take from another, the other names of each tool that a policy rule
matches (the table's, the default profile's, each before its hash), its search index
over whatever a server sends, what grows the versions its agents watch, and what it
says of its cap."""

from __future__ import annotations

import sys
from typing import Any

import msgspec

from mcpd.config.tables.model import NamingConfig
from mcpd.config.tables.profiles import ProfileConfig
from mcpd.registry.naming.names import assign
from mcpd.registry.naming.spelling import candidate_name, hashed_name
from mcpd.registry.profiles.views import ProfileView
from mcpd.registry.tables.catalog import Catalog
from protocol.mcp import core as mcp
from protocol.mcp import features


def tool(name: str, description: str = "", schema: bytes | None = None) -> mcp.Tool:
    raw = msgspec.Raw(schema if schema is not None else b'{"type":"object"}')
    return mcp.Tool(name=name, description=description or f"does {name}", inputSchema=raw)


def view(catalog: Catalog, **profile: Any) -> ProfileView:
    v = ProfileView("p", catalog)
    v.configure(msgspec.convert(profile, ProfileConfig), catalog.naming, 128)
    return v


def catalog(**servers: list[str]) -> Catalog:
    c = Catalog(NamingConfig())
    for alias, names in servers.items():
        c.update(alias, [tool(n) for n in names])
    return c


# -- patterns --


def test_a_server_pattern_is_a_glob_over_aliases() -> None:
    c = catalog(git=["status"], github=["issues"], fs=["read"])
    v = view(c, servers=["git*"])
    assert v.servers() == ["git", "github"]
    assert v.has_server("github") and not v.has_server("fs")
    assert not v.admits_prompt("fs", "anything") and not v.admits_resource("fs", "x://1")


# -- names of the view's own --


def test_a_tool_named_like_anothers_hashed_name_does_not_take_it() -> None:
    naming = NamingConfig(template="{tool}", max_length=64)
    # Two servers both offer "t": each gets "t_" and a hash. A third server lists a
    # tool literally named like the first one's hashed name.
    taken = hashed_name(candidate_name(naming.template, "a", "t"), "a", "t", naming.max_length)
    names = assign(naming, [("a", "t"), ("b", "t"), ("c", taken)])
    assert names[("a", "t")] == taken  # a name shaped like a hashed one is hashed
    assert names[("c", taken)] != taken
    assert len(set(names.values())) == 3


def test_names_of_the_view_are_the_same_whatever_order_the_tools_come_in() -> None:
    naming = NamingConfig(template="{tool}", max_length=16)
    keys = [("a", "t"), ("b", "t"), ("a", "x" * 30), ("b", "x" * 30), ("c", "t_1")]
    assert assign(naming, keys) == assign(naming, list(reversed(keys)))
    assert all(len(n) <= 16 for n in assign(naming, keys).values())


def test_a_renamed_view_finds_its_own_names_only() -> None:
    c = catalog(git=["status"], fs=["read"])
    v = view(c, template="{alias}.{tool}")
    assert sorted(e.local for e in v.entries()) == ["fs_read", "git_status"]
    found = v.lookup("git_status")
    assert found is not None and (found.alias, found.name) == ("git", "status")
    assert v.lookup("mcp__git__status") is None
    # Reconfigured to the table's naming: the table's names, and not the old ones.
    v.configure(ProfileConfig(), c.naming, 128)
    assert v.lookup("git_status") is None and v.lookup("mcp__git__status") is not None


def test_each_entry_carries_the_tools_other_names_for_the_policy() -> None:
    c = catalog(gh=["delete_repo", "delete.repo", "merge"])
    table = {e.name: e for e in c.entries()}
    # Both want mcp__gh__delete_repo, so both are hashed; each keeps the name it wanted.
    assert table["delete_repo"].other_names == ("mcp__gh__delete_repo",)
    assert table["delete.repo"].other_names == ("mcp__gh__delete_repo",)
    assert table["merge"].other_names == ()
    hosts = view(c, template="{alias}__{tool}")
    mine = {e.name: e for e in hosts.entries()}
    assert mine["merge"].local == "gh__merge"
    assert mine["merge"].other_names == ("mcp__gh__merge",)
    assert set(mine["delete_repo"].other_names) == {
        table["delete_repo"].local,
        "mcp__gh__delete_repo",
        "gh__delete_repo",
    }


def test_the_default_profiles_own_names_are_every_other_profiles_too() -> None:
    c = catalog(gh=["merge"])
    default = ProfileView("default", c)
    default.configure(ProfileConfig(template="{alias}_{tool}"), c.naming, 128)
    ci = ProfileView("ci", c)
    ci.configure(ProfileConfig(), c.naming, 128, default)
    [merge] = ci.entries()
    # The table's name, so the table's entry would do but for the default's name.
    assert (merge.local, merge.other_names) == ("mcp__gh__merge", ("gh_merge",))
    assert ci.lookup("mcp__gh__merge") is merge
    default.configure(ProfileConfig(template="x_{alias}_{tool}"), c.naming, 128)
    ci.configure(ProfileConfig(), c.naming, 128, default)
    assert [e.other_names for e in ci.entries()] == [("x_gh_merge",)]
    # Under the table's naming again, the default adds no name: the view is the table.
    default.configure(ProfileConfig(), c.naming, 128)
    ci.configure(ProfileConfig(), c.naming, 128, default)
    assert ci.identity and ci.entries() == c.entries()


# -- the search index over what servers send --


def test_a_schema_too_deep_to_read_does_not_break_the_profiles_search() -> None:
    depth = sys.getrecursionlimit()
    deep = b'{"type":"object","properties":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}"
    c = Catalog(NamingConfig())
    c.update("evil", [tool("deep", "deep one", deep)])
    c.update("mail", [tool("send_mail", "Send an email")])
    v = view(c, discovery="search")
    hits = v.search("send an email", 3)
    assert hits[0].name == "mcp__mail__send_mail"
    assert [h.name for h in v.search("deep", 3)] == ["mcp__evil__deep"]


def test_a_schema_that_is_no_object_is_searched_without_its_arguments() -> None:
    c = Catalog(NamingConfig())
    c.update("odd", [tool("listed", "a list schema", b"[1,2]"), tool("text", "x", b'"s"')])
    v = view(c, discovery="search")
    assert {h.name for h in v.search("list schema", 5)} == {"mcp__odd__listed"}


def test_the_index_is_rebuilt_when_a_tool_changes_and_kept_otherwise() -> None:
    c = catalog(git=["status"])
    v = view(c, discovery="search")
    index = v.index()
    assert v.index() is index
    c.update("git", [tool("status"), tool("tree", "shows the working tree")])
    assert v.index() is not index
    assert v.search("working tree", 1)[0].name == "mcp__git__tree"


# -- versions and what the view says --


def test_prompts_and_resources_of_servers_outside_the_view_leave_it_alone() -> None:
    c = catalog(git=["status"], fs=["read"])
    v = view(c, servers=["git"])
    before = v.offered()
    c.prompts.update("fs", [features.Prompt(name="p")])
    c.resources.update("fs", [features.Resource(uri="file:///x", name="x")], [])
    assert v.offered() == before
    c.prompts.update("git", [features.Prompt(name="p")])
    assert v.offered() == (before[0] + 1, before[1])
    c.resources.update("git", [features.Resource(uri="git://x", name="x")], [])
    assert v.offered() == (before[0] + 1, before[1] + 1)
    c.set_availability("fs", False, "down")
    assert v.offered() == (before[0] + 1, before[1] + 1)


def test_a_prompt_the_view_denies_is_no_news_to_it() -> None:
    c = catalog(git=["status"])
    v = view(c, prompts={"deny": ["draft_*"]})
    before = v.offered()
    c.prompts.update("git", [features.Prompt(name="draft_reply")])
    assert v.offered() == before


def test_a_tool_list_change_the_view_does_not_show_is_no_news_to_it() -> None:
    # Without the alias in the template, a's "shared" shares its name with b's.
    c = Catalog(NamingConfig(template="{tool}"))
    for alias in ("a", "b"):
        c.update(alias, [tool("shared"), tool(f"own_{alias}")])
    hidden, filtered = view(c, servers=["a"]), view(c, tools={"allow": ["a/*", "b/own_b"]})
    before = hidden.sync(), filtered.sync()
    c.update("b", [tool("shared"), tool("own_b"), tool("grown")])
    c.update("b", [tool("shared", "does more"), tool("own_b"), tool("grown")])
    assert (hidden.sync(), filtered.sync()) == before
    c.update("b", [tool("shared"), tool("own_b", "does more")])
    assert (hidden.sync(), filtered.sync()) == (before[0], before[1] + 1)


def test_over_the_cap_is_said_only_where_everything_is_listed() -> None:
    c = catalog(s=[f"t{i}" for i in range(5)])
    listed = ProfileView("dev", c)
    listed.configure(ProfileConfig(max_tools=4), c.naming, 128)
    warning = listed.over_cap()
    assert warning is not None and "'dev'" in warning and "5 tools" in warning and "(4)" in warning
    searched = ProfileView("dev", c)
    searched.configure(ProfileConfig(max_tools=4, discovery="auto"), c.naming, 128)
    assert searched.over_cap() is None and searched.mode == "search"
    listed.configure(ProfileConfig(max_tools=5), c.naming, 128)
    assert listed.over_cap() is None


def test_the_closest_names_are_of_the_view_and_a_huge_name_gets_none() -> None:
    c = catalog(git=["status"], fs=["stat"])
    v = view(c, servers=["git"])
    assert v.closest("mcp__git__statu") == ["mcp__git__status"]
    assert "mcp__fs__stat" not in v.closest("mcp__fs__stat")
    assert v.closest("mcp__git__status" * 1000) == []


def test_markers_are_of_the_views_servers_only() -> None:
    c = catalog(git=["status"], fs=["read"])
    v = view(c, servers=["git"])
    c.set_availability("fs", False, "unavailable: fs is down")
    assert v.markers() == {}
    c.set_availability("git", False, "unavailable: git is down")
    assert v.markers() == {"git": "unavailable: git is down"}
