"""What mcpd answers a tools/call it does not send to a server, before any rule runs:
an unknown name (with the outage that may explain it, or the names it is close to),
and a tool, prompt or template held until a person approves its changed definition."""

from __future__ import annotations

from typing import Any

from protocol import mcp
from protocol.visible import visible

from ..registry.shown import Entry
from .profiles import ProfileServers


def unknown_tool(
    profile: ProfileServers, name: str, *, own_user: bool = False
) -> mcp.CallToolResult:
    """``own_user``: the agent is the daemon's own user's or root's (``Outage.for_agent``)."""
    down = profile.down_for(name, own_user=own_user)
    if down is not None:
        text = f"No tool {_clip(name)!r} is listed now. {down}"
    else:
        near = [_suggested(profile, n) for n in profile.closest(name)]
        hint = f" Did you mean: {', '.join(near)}?" if near else ""
        text = f"Unknown tool {_clip(name)!r}.{hint} Call tools/list for the current tools."
    return mcp.text_result(text, is_error=True)


def _suggested(profile: ProfileServers, local: str) -> str:
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


def held_meta(alias: str, original: str, why: str) -> dict[str, Any]:
    # The server's name for the item, written out as in ``mcpd/originalName``.
    return {"mcpd/held": {"server": alias, "item": visible(original), "reason": why}}


def _clip(name: str, limit: int = 200) -> str:
    """An unknown name as quoted back: a huge one would cost its size again in the reply."""
    return name if len(name) <= limit else f"{name[:limit]}... ({len(name)} characters)"
