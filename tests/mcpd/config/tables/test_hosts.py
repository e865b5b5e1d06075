"""The MCP hosts mcpd connects to (``mcpd.config.tables.hosts``): the prefix each puts before
a tool's name as it cleans the entry's name, the room that leaves, and the profile
named after each, derived from the default one."""

from __future__ import annotations

import pytest

from mcpd.config.tables.hosts import (
    HOSTS,
    TEMPLATE,
    builtin_profiles,
    host_prefix,
    host_profile,
    max_tool_name,
)
from mcpd.config.tables.profiles import DEFAULT_PROFILE, EVERYTHING, ProfileConfig


@pytest.mark.parametrize(
    ("key", "name", "prefix"),
    [
        ("claude-code", "mcpd", "mcp__mcpd__"),
        ("claude-code", "my tools.v2", "mcp__my_tools_v2__"),
        ("claude-desktop", "anything at all", ""),
        ("cursor", "a/b", "mcp_a_b_"),
        ("gemini-cli", "team:tools.v2 x", "mcp_team:tools.v2_x_"),
        ("codex", "mcpd", "mcp__mcpd__"),
        ("vscode", "MCPD", "mcp_mcpd_"),
        ("vscode", "My Tools!!  v2", "mcp_my_tools_v2_"),
        ("vscode", "a-very-long-entry-name", "mcp_a-very-long-e_"),
    ],
)
def test_each_host_cleans_the_entry_name_into_its_prefix(key: str, name: str, prefix: str) -> None:
    assert host_prefix(key, name) == prefix


def test_vs_codes_prefix_is_never_longer_than_eighteen() -> None:
    assert len(host_prefix("vscode", "x" * 100)) == 18


@pytest.mark.parametrize(
    ("key", "room"),
    [
        ("claude-code", 53),
        ("claude-desktop", 64),
        ("cursor", 55),
        ("gemini-cli", 54),
        ("codex", 53),
        ("vscode", 55),
    ],
)
def test_the_room_a_hosts_prefix_leaves_for_mcpds_names(key: str, room: int) -> None:
    assert max_tool_name(key) == room
    assert len(host_prefix(key)) + room == HOSTS[key].max_name


def test_a_host_with_a_prefix_gets_short_names_that_fit() -> None:
    profile = host_profile("claude-code", EVERYTHING)
    assert (profile.template, profile.max_length) == (TEMPLATE, 53)
    # A default that asks for shorter names keeps them.
    shorter = host_profile("claude-code", ProfileConfig(max_length=40))
    assert shorter.max_length == 40
    longer = host_profile("claude-code", ProfileConfig(max_length=60))
    assert longer.max_length == 53


def test_a_host_without_a_prefix_keeps_the_defaults_names() -> None:
    default = ProfileConfig(template="{tool}", max_length=30)
    profile = host_profile("claude-desktop", default)
    assert (profile.template, profile.max_length) == ("{tool}", 30)


def test_a_host_with_a_tool_cap_searches_above_it() -> None:
    cursor = host_profile("cursor", EVERYTHING)
    assert (cursor.max_tools, cursor.discovery) == (40, "auto")
    # A default that caps lower, or already chose how tools are found, keeps that.
    lower = host_profile("cursor", ProfileConfig(max_tools=10, discovery="search"))
    assert (lower.max_tools, lower.discovery) == (10, "search")
    uncapped = host_profile("claude-code", EVERYTHING)
    assert (uncapped.max_tools, uncapped.discovery) == (None, "all")


def test_the_hosts_profiles_are_derived_from_the_default_and_yield_to_configured_ones() -> None:
    narrowed = ProfileConfig(servers=["git"])
    own_cursor = ProfileConfig(servers=["notes"])
    profiles = builtin_profiles({DEFAULT_PROFILE: narrowed, "cursor": own_cursor})
    assert set(profiles) == set(HOSTS) - {"cursor"}
    assert all(p.servers == ["git"] for p in profiles.values())
    assert set(builtin_profiles({})) == set(HOSTS)
