"""tools/list on the agent side: a page of the listing the agent's profile shows, in
the shape of the era the agent speaks, with the states of that profile's servers."""

from __future__ import annotations

from msgspec import UNSET

from protocol.mcp import core as mcp
from protocol.mcp.serving import RequestContext

from ...registry.tables.table import ListedTool, listed_name
from ...servers.all_servers import AllServers
from ..profiles import Profile
from .paging import page_of


def list_tools(
    servers: AllServers,
    profile: Profile,
    params: mcp.ListToolsParams,
    ctx: RequestContext | None,
    page_size: int,
) -> mcp.ListToolsResult:
    servers.refresh()
    modern = ctx is not None and ctx.era == "modern"
    # A projection keeps every name in its place: a cursor is good in either era's.
    tools, after = page_of(profile.shown_to(modern), params.cursor, page_size, _name)
    return mcp.ListToolsResult(
        tools=list(tools),
        nextCursor=UNSET if after is None else after,
        ttlMs=0 if modern else UNSET,
        cacheScope="private" if modern else UNSET,
        meta={"mcpd/servers": servers.states(profile.has_server)},
    )


def _name(item: ListedTool) -> bytes:
    # A tool's name stands for it: a tool changed in place keeps its place in the list.
    return listed_name(item).encode()
