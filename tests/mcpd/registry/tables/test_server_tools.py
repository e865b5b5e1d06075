from __future__ import annotations

from mcpd.config.tables.servertable import ToolsConfig
from mcpd.registry.gating.gate import ListGate
from mcpd.registry.tables.server_tools import ServerTools
from protocol.mcp import core as mcp


def _tool(name: str) -> mcp.Tool:
    return mcp.Tool(name=name, description=f"{name} things")


def test_an_entry_carries_the_servers_state_and_shares_its_flags() -> None:
    raw = {"search": _tool("search"), "fetch": _tool("fetch")}
    server = ServerTools(raw, True, None, ListGate(), "notes")
    server.set_state(False, "down: exited")
    first = server.entry("notes__search", "notes", "search")
    second = server.entry("notes__fetch", "notes", "fetch")
    assert (first.alias, first.original, first.local) == ("notes", "search", "notes__search")
    assert not first.available and first.held is None
    assert first.look is second.look == (True, "down: exited")


def test_a_renamed_tool_is_known_by_its_new_name_and_calls_the_old_one() -> None:
    rules = ToolsConfig(rename={"search": "find"})
    server = ServerTools({"search": _tool("search")}, False, rules, ListGate(), "notes")
    assert set(server.tools) == {"find"}
    entry = server.entry("notes__find", "notes", "find")
    assert (entry.original, entry.name, entry.available) == ("search", "find", True)


def test_a_hashed_entry_keeps_the_name_it_wanted() -> None:
    server = ServerTools({"search": _tool("search")}, False, None, ListGate(), "notes")
    entry = server.entry("notes__search_0a1b2c", "notes", "search", "notes__search")
    assert entry.other_names == ("notes__search",)
