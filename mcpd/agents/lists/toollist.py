"""tools/list on the agent side: a page of the listing the agent's profile shows, in
the shape of the era the agent speaks, with the states of that profile's servers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from msgspec import UNSET

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.result_pieces import encode_result_pieces
from protocol.mcp import core as mcp
from protocol.mcp.serving import RequestContext

from ...registry.tables.table import ListedTool, listed_name
from ...servers.all_servers import AllServers
from ..profiles import Profile
from .paging import page_of

_PIECE_TOOLS: Final = 256  # tools per piece of a long tools/list reply, at most
_PIECE_BYTES: Final = 256 * 1024  # and about as many bytes


def list_tools(
    servers: AllServers,
    profile: Profile,
    params: mcp.ListParams,
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


def in_pieces(
    rid: rpc.Id, result: mcp.ListToolsResult, ctx: RequestContext | None
) -> Iterator[bytes | memoryview] | None:
    """The reply of a listing too long to make whole, in pieces to write as the agent
    reads them: each tool is made for agents as it is encoded, and a listing of
    thousands is never whole in memory. None for one short enough to make whole."""
    if len(result.tools) <= _PIECE_TOOLS:
        return None
    if ctx is not None and ctx.era == "modern":
        result.resultType = mcp.COMPLETE
    return encode_result_pieces(rid, result, "tools", _PIECE_TOOLS, _PIECE_BYTES)


def _name(item: ListedTool) -> bytes:
    # A tool's name stands for it: a tool changed in place keeps its place in the list.
    return listed_name(item).encode()
