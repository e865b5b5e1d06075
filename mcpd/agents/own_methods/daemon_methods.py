"""The daemon's own methods on its sockets, apart from those of a command of its own
(approvals, pins, logins):

- ``mcpd/status``: what ``mcpd status`` shows, as the asking agent's profile and user
  may read it;
- ``mcpd/reload``: the config read again and put in force (``mcpd reload``), for the
  daemon's own user and root, on its own Unix socket (not a profile's:
  ``profile_bound``);
- ``mcpd/reset``: a server's circuit closed on trial (``mcpd reset``), for the same
  callers as ``mcpd/reload``, of the servers the connection's profile has;
- ``mcpd/lineLimit``: the longest line the connection takes, which ``mcpd bridge``
  holds its host's lines to (past it, the connection closes).
"""

from __future__ import annotations

import msgspec

from protocol.jsonrpc import messages as rpc
from protocol.mcp.serving import RequestContext

from ..agent import Agent
from .profile_methods import OwnMethod, ProfileMethods, owner_only


async def _status(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    own_user = conn.reads_shared_output()
    return api.control.status(api.scope_of(conn), own_user=own_user)


async def _reload(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    owner_only(conn, req.method)
    return await api.control.reload()


class _Server(msgspec.Struct):
    server: str


async def _reset(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    owner_only(conn, req.method)
    params = rpc.decode_as(req.params, _Server)
    peer = conn.peer
    assert peer is not None  # the owner on the socket, as the kernel says
    # On a profile's socket (or in a profile chosen), only that profile's servers are
    # there, as its status shows them.
    who = f"uid {peer.uid} (pid {peer.pid})"
    return api.control.reset(params.server, who, api.scope_of(conn))


async def _line_limit(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    if conn.line_limit is None:
        raise rpc.RPCError(rpc.METHOD_NOT_FOUND, "mcpd/lineLimit is for a line connection")
    return {"maxLineBytes": conn.line_limit}


HANDLERS: dict[str, OwnMethod[ProfileMethods]] = {
    "mcpd/status": _status,
    "mcpd/reload": _reload,
    "mcpd/reset": _reset,
    "mcpd/lineLimit": _line_limit,
}
