"""What a model is told of a tools/call mcpd sends to no server: an unknown name (with
the outage that explains it, or the names near it) and a held tool; a name an agent
made up is quoted back bounded and escaped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from mcpd.agents.calls.unrouted import held_meta, held_text, held_tool, unknown_tool
from mcpd.registry.tables.shown import Entry
from protocol.mcp import core as mcp


class Servers:
    """What the servers say of a name no profile lists: ``down`` for any name, as told
    of the servers ``only`` admits."""

    def __init__(self, down: str | None) -> None:
        self.down = down
        self.asked: list[tuple[str, list[str], str | None]] = []

    def down_for(
        self,
        name: str,
        only: Callable[[str], bool] | None = None,
        template: str | None = None,
        *,
        own_user: bool = False,
    ) -> str | None:
        admitted = [a for a in ("notes", "hidden") if only is None or only(a)]
        self.asked.append((name, admitted, template))
        return self.down


class Profile:
    """What the agent's profile says of a name it does not list; it has the server
    ``notes`` and not ``hidden``."""

    template = "mcp__{alias}__{tool}"

    def __init__(
        self,
        down: str | None = None,
        near: list[str] | None = None,
        listed: int = 0,
        lists_tools: bool = True,
    ) -> None:
        self.servers = Servers(down)
        self.near = near or []
        self.lists_tools = lists_tools  # else tools/list holds the meta-tools
        # ``listed`` servers list a tool ``echo``, as mcp__s0__echo and so on.
        self.listed = [tool_of(f"mcp__s{i}__echo") for i in range(listed)]

    def has_server(self, alias: str) -> bool:
        return alias == "notes"

    def closest(self, name: str) -> list[str]:
        return self.near

    def named(self, name: str) -> list[Entry]:
        return [e for e in self.listed if name in (e.original, e.name)]

    def lookup(self, name: str) -> Entry | None:
        if name not in self.near:
            return None
        tool = mcp.Tool(name=name, inputSchema=msgspec.Raw(b"{}"))
        return Entry(name, name.split("__")[1], name, tool)


def unknown(profile: Profile, name: str) -> mcp.CallToolResult:
    return unknown_tool(profile.servers, profile, name)  # type: ignore[arg-type]


def tool_of(local: str) -> Entry:
    _, alias, original = local.split("__")
    return Entry(local, alias, original, mcp.Tool(name=original, inputSchema=msgspec.Raw(b"{}")))


def text(result: mcp.CallToolResult) -> str:
    assert result.isError is True
    [block] = result.content
    assert isinstance(block, mcp.TextContent)
    return block.text


def test_an_unknown_name_of_a_down_server_says_why() -> None:
    profile = Profile(down="The server notes is down since 10:00 (exit 1); retried at 10:05.")
    said = text(unknown(profile, "mcp__notes__search"))
    assert said == (
        "No tool 'mcp__notes__search' is listed now. "
        "The server notes is down since 10:00 (exit 1); retried at 10:05."
    )
    # Asked of the profile's servers only, under the profile's names.
    assert profile.servers.asked == [("mcp__notes__search", ["notes"], "mcp__{alias}__{tool}")]


def test_an_unknown_name_gets_the_names_near_it_or_none() -> None:
    near = Profile(near=["mcp__notes__search", "mcp__notes__seek"])
    assert text(unknown(near, "mcp__notes__serch")) == (
        "Unknown tool 'mcp__notes__serch'. Did you mean: mcp__notes__search (server "
        "'notes'), mcp__notes__seek (server 'notes')? Call tools/list for the current tools."
    )
    assert text(unknown(Profile(), "x")) == (
        "Unknown tool 'x'. Call tools/list for the current tools."
    )


def test_where_tools_list_holds_the_meta_tools_an_unknown_name_is_pointed_at_search() -> None:
    searching = Profile(near=["mcp__notes__search"], lists_tools=False)
    assert text(unknown(searching, "mcp__notes__serch")) == (
        "Unknown tool 'mcp__notes__serch'. Did you mean: mcp__notes__search (server "
        "'notes')? Call mcpd_search_tools to find the current tools."
    )


def test_a_servers_own_name_gets_each_tool_listed_under_it_then_the_near_ones() -> None:
    both = Profile(near=["mcp__s0__echo", "mcp__notes__etch"], listed=2)
    result = unknown(both, "echo")
    assert text(result) == (
        "Unknown tool 'echo'. Did you mean: mcp__s0__echo (server 's0'), mcp__s1__echo "
        "(server 's1'), mcp__notes__etch (server 'notes')? Call tools/list for the current "
        "tools."
    )
    assert result.meta == {
        "mcpd/unknownTool": {
            "suggested": ["mcp__s0__echo", "mcp__s1__echo", "mcp__notes__etch"],
            "named": 2,
        }
    }


def test_many_tools_of_the_name_are_shown_a_few_and_the_rest_counted() -> None:
    said = text(unknown(Profile(listed=12), "echo"))
    assert said == (
        "Unknown tool 'echo'. Did you mean: "
        + ", ".join(f"mcp__s{i}__echo (server 's{i}')" for i in range(5))
        + ", 7 more tools named 'echo'? Call tools/list for the current tools."
    )


@pytest.mark.parametrize("profile", [Profile(), Profile(down="It is down.")])
def test_a_huge_or_hostile_name_is_quoted_back_bounded_and_on_one_line(profile: Any) -> None:
    huge = "a\n\x1b[2J" + "x" * 1_000_000
    said = text(unknown(profile, huge))
    assert len(said) < 400
    assert f"({len(huge)} characters)" in said
    assert "\n" not in said and "\x1b" not in said and "\\x1b[2J" in said
    quoted = text(unknown(Profile(), 'it\'s "x"\u202e'))
    assert quoted.startswith("Unknown tool 'it\\'s \"x\"\\u202e'.")


def test_a_held_tool_says_why_and_how_to_go_on() -> None:
    tool = mcp.Tool(name="search", inputSchema=msgspec.Raw(b"{}"))
    entry = Entry("mcp__notes__search", "notes", "search", tool)
    entry.held = "its definition changed since it was approved; run `mcpd approve notes`"
    result = held_tool(entry, "mcp__notes__search")
    said = text(result)
    assert said == (
        "The tool 'mcp__notes__search' of the server 'notes' is held by mcpd: its "
        "definition changed since it was approved; run `mcpd approve notes`. It was not "
        "called. Ask the user to review it (`mcpd tools --pending` shows what changed); "
        "until it is approved, other tools keep working."
    )
    assert result.meta == {"mcpd/held": {"server": "notes", "item": "search", "reason": entry.held}}


def test_held_words_name_the_kind_and_clip_the_name() -> None:
    said = held_text("prompt", "p" * 500, "notes", "why")
    assert said.startswith("The prompt 'pppp") and "(500 characters)" in said
    assert "other prompts keep working" in said
    assert held_meta("a", "b", "c") == {"mcpd/held": {"server": "a", "item": "b", "reason": "c"}}


def test_the_held_items_name_in_mcpds_meta_hides_nothing() -> None:
    item = held_meta("a", "b\n\x1b[2J\u202e", "c")["mcpd/held"]["item"]
    assert item == "b\\n\\x1b[2J\\u202e"
