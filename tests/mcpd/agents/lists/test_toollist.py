"""tools/list on the agent side (``list_tools``) over a profile of a few tools and no
server behind them: the page asked for, in the shape of the era the agent speaks,
with the servers' states, and a cursor that stays good as long as the list does."""

from __future__ import annotations

import msgspec
import pytest
from msgspec import UNSET

from mcpd.agents.lists.toollist import list_tools
from mcpd.agents.profiles import Profile
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import NamingConfig
from mcpd.registry.gating.gate import ListGate
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.all_servers import AllServers
from mcpd.servers.supervisor import Supervisor
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import RequestContext

MODERN = RequestContext("modern", "2026-07-28", {}, {})
LEGACY = RequestContext("legacy", "2025-11-25", {}, {})


def tool(name: str) -> mcp.Tool:
    sent = {"name": name, "description": f"{name}.", "inputSchema": {"type": "object"}}
    return msgspec.json.decode(msgspec.json.encode(sent), type=mcp.Tool)


def profile(*names: str) -> tuple[AllServers, Profile]:
    """The servers, and the default profile of them, whose one server lists ``names``."""
    catalog = Catalog(NamingConfig(), ListGate())
    config = parse_config({"servers": {"notes": {"command": "x"}}}, env={})
    servers = AllServers(Supervisor(config, catalog), catalog)
    catalog.update("notes", [tool(n) for n in names], trusted=False)
    return servers, Profile(servers.view_of("default"))


def names(result: mcp.ListToolsResult) -> list[str]:
    return [t.name for t in result.tools]


def params(cursor: str | None = None) -> mcp.ListParams:
    return mcp.ListParams() if cursor is None else mcp.ListParams(cursor=cursor)


def test_a_modern_agent_gets_a_private_uncached_listing() -> None:
    result = list_tools(*profile("a", "b"), params(), MODERN, 0)
    assert names(result) == ["a", "b"]
    assert (result.ttlMs, result.cacheScope, result.nextCursor) == (0, "private", UNSET)
    assert "mcpd/servers" in (result.meta or {})


def test_a_legacy_agent_gets_no_caching_fields() -> None:
    for ctx in (LEGACY, None):
        result = list_tools(*profile("a"), params(), ctx, 0)
        assert (result.ttlMs, result.cacheScope) == (UNSET, UNSET)


def test_the_list_comes_in_pages_followed_by_their_cursors() -> None:
    both = profile("a", "b", "c", "d", "e")
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(5):
        result = list_tools(*both, params(cursor), MODERN, 2)
        seen += names(result)
        cursor = None if result.nextCursor is UNSET else result.nextCursor
        if cursor is None:
            break
    assert seen == list("abcde")


def test_a_cursor_from_another_list_is_refused() -> None:
    first = list_tools(*profile("a", "b", "c"), params(), MODERN, 2)
    assert isinstance(first.nextCursor, str)
    with pytest.raises(rpc.RPCError) as info:
        list_tools(*profile("x", "y", "z"), params(first.nextCursor), MODERN, 2)
    assert info.value.code == rpc.INVALID_PARAMS


def test_a_cursor_stays_good_in_either_era() -> None:
    both = profile("a", "b", "c")
    first = list_tools(*both, params(), MODERN, 2)
    assert isinstance(first.nextCursor, str)
    rest = list_tools(*both, params(first.nextCursor), LEGACY, 2)
    assert names(rest) == ["c"]
