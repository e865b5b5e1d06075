"""What mcpd answers a tools/call it does not send to a server, before any rule runs:
an unknown name (with the outage that may explain it, or the tools listed under that name and
the names close to it), and a tool, prompt or template held until a person approves its
changed definition."""

from __future__ import annotations

from protocol.mcp import core as mcp
from protocol.shown.visible import visible

from ...registry.tables.shown import Entry
from ...servers.all_servers import AllServers
from ..lists.list_hints import LIST_TOOLS, SEARCH_TOOLS, UNKNOWN_TOOL
from ..profiles import Profile

# Tools of the name called shown by their local names: enough to tell a few servers'
# apart, and a bounded answer however many list it.
NAMED_SHOWN = 5


def unknown_tool(
    servers: AllServers, profile: Profile, name: str, *, own_user: bool = False
) -> mcp.CallToolResult:
    """An outage told is of a server ``profile`` has, never of another; ``own_user``:
    the agent is the daemon's own user's or root's (``Outage.for_agent``). A name a
    server gives its tool (or a rename gives it) is answered with the local names it is
    listed under, then the names near it."""
    down = servers.down_for(name, profile.has_server, profile.template, own_user=own_user)
    if down is not None:
        return mcp.text_result(f"No tool {_clip(name)!r} is listed now. {down}", is_error=True)
    named = profile.named(name)
    shown = [f"{e.local} (server {e.alias!r})" for e in named[:NAMED_SHOWN]]
    if len(named) > NAMED_SHOWN:
        shown.append(f"{len(named) - NAMED_SHOWN} more tools named {_clip(name)!r}")
    suggested = [e.local for e in named[:NAMED_SHOWN]]
    taken = {e.local for e in named}
    near = [n for n in profile.closest(name) if n not in taken]
    shown += [_suggested(profile, n) for n in near]
    hint = f" Did you mean: {', '.join(shown)}?" if shown else ""
    listing = LIST_TOOLS if profile.lists_tools else SEARCH_TOOLS
    result = mcp.text_result(f"Unknown tool {_clip(name)!r}.{hint} {listing}", is_error=True)
    # The names suggested, for a program; and the sentence on listing marked as mcpd's,
    # for a client that words it its own way.
    result.meta = {UNKNOWN_TOOL: {"suggested": [*suggested, *near], "named": len(named)}}
    return result


def _suggested(profile: Profile, local: str) -> str:
    """A name near the one called, with its server: two servers' tools may read alike."""
    entry = profile.lookup(local)
    return local if entry is None else f"{local} (server {entry.alias!r})"


def held_tool(entry: Entry, local: str) -> mcp.CallToolResult:
    """A call to ``entry``, held (``entry.held`` says why)."""
    why = entry.held or ""
    result = mcp.text_result(held_text("tool", local, entry.alias, why), is_error=True)
    result.meta = held_meta(entry.alias, entry.original, why)
    return result


def held_text(kind: str, local: str, alias: str, why: str) -> str:
    """What a model is told of a call to a held tool, prompt or template."""
    return (
        f"The {kind} {_clip(local)!r} of the server {alias!r} is held by mcpd: {why}. "
        "It was not called. Ask the user to review it (`mcpd tools --pending` shows what "
        f"changed); until it is approved, other {kind}s keep working."
    )


def held_meta(alias: str, original: str, why: str) -> mcp.Meta:
    # The server's name for the item, written out as in ``mcpd/originalName``.
    return {"mcpd/held": {"server": alias, "item": visible(original), "reason": why}}


def _clip(name: str, limit: int = 200) -> str:
    """An unknown name as quoted back: a huge one would cost its size again in the reply."""
    return name if len(name) <= limit else f"{name[:limit]}... ({len(name)} characters)"
