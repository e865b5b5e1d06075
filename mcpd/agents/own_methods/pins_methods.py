"""``mcpd/pins/...``: the socket methods behind ``mcpd approve``, ``mcpd tools
--pending|--findings`` and ``mcpd pins export|import|forget-unreadable``.

What waits for approval and what the rules found quote servers' texts as the servers
sent them (that is what a person has to read before approving), and approving decides
what every agent's model reads: like ``mcpd/reload``, all of them are only for the
daemon's own user and root, never for an agent in a profile, and only where the kernel
says who is asking (a Unix socket), so that an agent given the HTTP endpoint's token
cannot approve what its servers changed. Nor can an agent connected now approve or
import definitions through a process it started (its shell tool running ``mcpd
approve``), or one in its session (``persons_only``).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from protocol.jsonrpc import messages as rpc
from protocol.mcp.serving import RequestContext

from ...local.pins.pinanswers import FoundItems, HeldItems
from ...registry.pinning.definitions import BadPins
from ...registry.profiles.views import ProfileView
from ..agent import Agent
from .persons_only import refuse_an_agents_side
from .profile_methods import OwnMethod, ProfileMethods, owner_only

APPROVING = "approving definitions (mcpd approve)"


class _Only(msgspec.Struct):
    server: str | None = None


class _Pick(msgspec.Struct):
    kind: Literal["tool", "prompt", "template", "instructions", "resource"]
    name: str
    digest: str


class _Approve(msgspec.Struct):
    server: str
    # What the person was shown; None: all that waits.
    items: list[_Pick] | None = None
    # The server as a whole too (no names were given), once nothing of it waits.
    whole: bool = False


class _Export(msgspec.Struct):
    servers: list[str] | None = None


class _Import(msgspec.Struct):
    pins: msgspec.Raw
    replace: bool = False


async def _not_from_an_agent(api: ProfileMethods, conn: Agent, what: str) -> None:
    assert conn.peer is not None  # the owner, on the socket
    because = "an agent must not approve what its servers' definitions say"
    refuse_an_agents_side(conn.peer.decider(), await api.agents_kin(), what, because)


async def _pending(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    owner_only(conn, req.method)
    params = rpc.decode_as(req.params, _Only)
    _known(api, params.server)
    pending = api.control.pins.pending(params.server)
    listed = _listed_as(api.view(conn).view)
    for item in pending:
        local = listed.get((item["kind"], item["server"], item["name"]))
        if local is not None:
            item["local"] = local
    return HeldItems(pending=pending)


def _known(api: ProfileMethods, server: str | None) -> None:
    """A server asked about by name is one mcpd knows: nothing waiting of a misspelt
    alias would read as all being approved."""
    if server is not None and not api.control.pins.knows(server):
        raise rpc.RPCError(rpc.INVALID_PARAMS, f"no server named {server!r}")


def _listed_as(view: ProfileView) -> dict[tuple[str, str, str], str]:
    """The name agents of ``view`` know each tool and prompt by, by (kind, alias, the
    server's name): beside a server's name, which may read as another's."""
    out = {("tool", e.alias, e.original): e.local for e in view.entries()}
    for p in view.registry.prompts.entries():
        if view.admits_prompt(p.alias, p.name):
            out[("prompt", p.alias, p.original)] = p.local
    return out


async def _findings(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    owner_only(conn, req.method)
    params = rpc.decode_as(req.params, _Only)
    _known(api, params.server)
    return FoundItems(findings=api.control.pins.findings(params.server))


async def _approve(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    owner_only(conn, req.method)
    params = rpc.decode_as(req.params, _Approve)
    await _not_from_an_agent(api, conn, APPROVING)
    picks = None if params.items is None else [(p.kind, p.name, p.digest) for p in params.items]
    try:
        return await api.control.pins.approve(params.server, picks, params.whole)
    except KeyError:
        raise rpc.RPCError(rpc.INVALID_PARAMS, f"no server named {params.server!r}") from None


async def _may_approve(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    """Whether the one asking may approve, asked before a person is shown what waits
    and asked to approve it: a refusal after they read it all would waste their time."""
    owner_only(conn, req.method)
    await _not_from_an_agent(api, conn, APPROVING)
    return {}


async def _export(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    owner_only(conn, req.method)
    params = rpc.decode_as(req.params, _Export)
    try:
        return await api.control.pins.export(params.servers)
    except BadPins as exc:
        raise rpc.RPCError(-32000, str(exc)) from None


async def _import(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    owner_only(conn, req.method)
    params = rpc.decode_as(req.params, _Import)
    await _not_from_an_agent(api, conn, "importing pins (mcpd pins import)")
    try:
        return await api.control.pins.import_pins(bytes(params.pins), params.replace)
    except BadPins as exc:
        raise rpc.RPCError(rpc.INVALID_PARAMS, str(exc)) from None


async def _forget_unreadable(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    owner_only(conn, req.method)
    await _not_from_an_agent(api, conn, "forgetting unreadable pins (mcpd pins forget-unreadable)")
    try:
        return await api.control.pins.forget_unreadable()
    except OSError as exc:
        raise rpc.RPCError(-32000, f"cannot remove the unreadable pins: {exc}") from None


HANDLERS: dict[str, OwnMethod[ProfileMethods]] = {
    "mcpd/pins/pending": _pending,
    "mcpd/pins/findings": _findings,
    "mcpd/pins/approve": _approve,
    "mcpd/pins/may_approve": _may_approve,
    "mcpd/pins/export": _export,
    "mcpd/pins/import": _import,
    "mcpd/pins/forget_unreadable": _forget_unreadable,
}
